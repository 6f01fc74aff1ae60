"""SmolLM3 targets (``smollm3``), written by transformers itself (``save_pretrained``, float32): Llama's layers,
those whose ``no_rope_layers`` entry is 0 unrotated (NoPE: the gqa attention's rope_layers_key, a NoRotation in the
layer's rotation slot; by default every no_rope_layer_interval-th layer), a window on the layers ``layer_types``
marks sliding (by default the NoPE layers, where use_sliding_window), q/k/v/o biases by attention_bias, MLP biases by
mlp_bias, tied or not. Each gives transformers' logits (float32, 1e-4) over a whole sequence and through the paged
pool; greedy speculative decoding equals target-only; a config transformers' model fails on or computes two ways is
refused by name before any tensor is read."""
import pytest
import torch

import draftsmith
from draftsmith.components.rope import NoRotation, Rotary
from draftsmith.testing import write_target
from draftsmith.testing.decoding import decodes_as_target_only
from test_phi3_target import echo_draft, edited
from test_targets_zoo import ATOL, IDS, full_logits, ours, paged_logits, reference, refusal_before_tensors

TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}   # SmolLM3's defaults are past a tiny vocabulary
WINDOW = {"use_sliding_window": True, "sliding_window": 4}
CASES = {   # name: write_target overrides; a list is repeated to the layer count
    "smollm3-3b (NoPE every 4th, tied)": {},
    "NoPE every 2nd, biases, untied": {"no_rope_layer_interval": 2, "attention_bias": True, "mlp_bias": True,
                                       "tie_word_embeddings": False},
    "windows on the NoPE layers": {**WINDOW, "no_rope_layers": [0, 1, 1]},
    "layer_types stated, head_dim 32": {**WINDOW, "head_dim": 32, "no_rope_layers": [1, 0],
                                        "layer_types": ["sliding_attention", "full_attention"]},
}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made = {}

    def get(name, layers=4):   # 8 layers where an EAGLE-3 draft taps them
        if (name, layers) not in made:
            over = {k: (v * layers)[:layers] if isinstance(v, list) else v for k, v in CASES[name].items()}
            made[name, layers] = write_target(tmp_path_factory.mktemp("smollm3"), "smollm3", num_hidden_layers=layers,
                                              **TOKENS, **over)
        return made[name, layers]
    return get


@pytest.mark.parametrize("name", sorted(CASES))
def test_smollm3_logits_match_transformers(targets, name):
    want = reference(targets(name), IDS)
    assert want.std() > 0.1
    torch.testing.assert_close(full_logits(ours(targets(name)), IDS), want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["smollm3-3b (NoPE every 4th, tied)", "windows on the NoPE layers"])
def test_paged_prefill_then_decode_matches_transformers(targets, name):
    folder = targets(name)
    torch.testing.assert_close(paged_logits(ours(folder), IDS[0]), reference(folder, IDS[:1])[0], atol=ATOL, rtol=0)


def test_each_layer_rotates_as_no_rope_layers_says_and_windows_as_layer_types_says(targets):
    layers = ours(targets("windows on the NoPE layers")).model.layers
    assert [type(layer.self_attn.rope) for layer in layers] == [NoRotation, Rotary, Rotary, NoRotation]
    assert [getattr(layer.self_attn.backend, "window", None) for layer in layers] == [4, None, None, 4]
    default = ours(targets("smollm3-3b (NoPE every 4th, tied)")).model.layers
    assert [type(layer.self_attn.rope) for layer in default] == [Rotary, Rotary, Rotary, NoRotation]


def test_the_nope_layers_and_the_window_matter_here(targets, tmp_path):
    """The same weights rotated on every layer, or without the window, give other logits (transformers' too): the
    parity tests above would see either mistake."""
    folder = targets("windows on the NoPE layers")
    got = full_logits(ours(folder), IDS)
    rotated = edited(folder, tmp_path / "rotated", no_rope_layers=[1, 1, 1, 1])
    assert (full_logits(ours(rotated), IDS) - got).abs().max() > 1e-2
    torch.testing.assert_close(full_logits(ours(rotated), IDS), reference(rotated, IDS), atol=ATOL, rtol=0)
    wide = edited(folder, tmp_path / "wide", sliding_window=64)
    assert (full_logits(ours(wide), IDS)[:, 5:] - got[:, 5:]).abs().max() > 1e-2


REFUSED = {   # name: (config.json changes, what the refusal says)
    "short no_rope_layers": ({"no_rope_layers": [1, 0]}, "no_rope_layers holds 2 entries for 4 layers; allowed: one "
                                                         "entry for each layer at least"),
    "no_rope_layers of 2": ({"no_rope_layers": [1, 2, 1, 0]}, "no_rope_layers is [1, 2, 1, 0]; allowed: a list of "
                                                              "0 / 1 entries"),
    "sliding without a window": ({"sliding_window": None}, "layer_types marks layer 0 sliding_attention, but "
                                                           "sliding_window is null"),
    "sliding switched off": ({"use_sliding_window": False}, "layer_types marks layer 0 sliding_attention while "
                                                            "use_sliding_window is false"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_is_not_computed_is_refused_before_the_tensors(targets, tmp_path, monkeypatch, name):
    changes, said = REFUSED[name]
    folder = edited(targets("windows on the NoPE layers"), tmp_path, **changes)
    message = refusal_before_tensors(folder, monkeypatch)
    assert message.startswith(f"{folder / 'config.json'}: smollm3 target: {said}"), message
    assert "Fix: set it in config.json to the checkpoint's own value" in message


def test_a_draft_s_rope_layers_list_that_says_nothing_of_its_layer_is_named():
    from types import SimpleNamespace

    from draftsmith.components.rope import rotates
    from draftsmith.errors import CheckpointError

    cfg = SimpleNamespace(no_rope_layers=[1], name_or_path="d")
    assert rotates(cfg, None, 5) and rotates(cfg, "no_rope_layers", 0)
    with pytest.raises(CheckpointError, match="no_rope_layers holds 1 entries for 2 layers"):
        rotates(cfg, "no_rope_layers", 1)


@pytest.mark.parametrize("name", ["smollm3-3b (NoPE every 4th, tied)", "windows on the NoPE layers"])
def test_speculative_decoding_equals_target_only(targets, tmp_path, name):
    folder = targets(name, layers=8)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=echo_draft(tmp_path / "d", folder))
    _, spec = decodes_as_target_only(model, [[1, 5, 9, 3, 4, 6], [7, 8]], max_new_tokens=24)
    assert sum(spec[0].stats.accepted_per_position) > 0   # drafted tokens were taken, not only the target's
