"""Phi-3 / Phi-4 targets (``model_type: phi3``: microsoft/phi-4, Phi-3-mini, Phi-4-mini), written by transformers
itself (``Phi3ForCausalLM.save_pretrained``, float32): the checkpoint's fused ``qkv_proj`` (q | k | v rows) and
``gate_up_proj`` (gate | up rows) are split at load, only the first ``partial_rotary_factor`` of each head rotates
(Phi-4-mini: 0.75), longrope's short factors and attention scaling are transformers', and ``sliding_window`` windows
every layer (``layer_types`` unread, as Phi3Model does). Each gives transformers' logits (float32, 1e-4) over a whole
sequence and through the paged pool; greedy speculative decoding with an EAGLE-3 draft equals target-only; a factor
no rotation can take is refused by name before any tensor is read."""
import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.errors import ArgumentError, CheckpointError
from draftsmith.testing import write_eagle3, write_target
from draftsmith.testing.decoding import decodes_as_target_only
from test_targets_zoo import ATOL, IDS, full_logits, ours, paged_logits, reference, refusal_before_tensors

# transformers' Phi3Config defaults pad_token_id and eos_token_id to 32000: out of a 96-token vocabulary
PHI3 = {"pad_token_id": None, "bos_token_id": 1, "eos_token_id": 2}
LEGACY = "rope_scaling (transformers 4)"   # a case's rope, written into config.json as rope_scaling


def longrope(factor: float, pairs: int, original: int = 64) -> dict:
    """Phi-3.5 / Phi-4-mini's rope: short factors up to ``original`` positions, long ones past them."""
    return {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": factor,
            "short_factor": [1.0 + 0.15 * i for i in range(pairs)], "long_factor": [3.0 + i for i in range(pairs)],
            "original_max_position_embeddings": original}


CASES = {   # name: write_target overrides
    "phi-4 (whole heads)": {},
    "phi-4-mini (0.75, tied)": {"partial_rotary_factor": 0.75, "tie_word_embeddings": True},
    "half, window 4": {"partial_rotary_factor": 0.5, "sliding_window": 4},
    "a third": {"partial_rotary_factor": 0.3},   # int(16 * 0.3): the first 4 channels
    "odd width of a 32 head": {"partial_rotary_factor": 0.3, "head_dim": 32},   # 9 channels: 5 pairs, as transformers
    "longrope, 0.75": {"partial_rotary_factor": 0.75, "rope_parameters": longrope(0.75, 6),
                       "original_max_position_embeddings": 64, "max_position_embeddings": 256},
    "longrope, whole heads": {"rope_parameters": longrope(1.0, 8), "original_max_position_embeddings": 64,
                              "max_position_embeddings": 256},
    # as Phi-3.5-mini's config.json writes it: rope_scaling (type longrope, the lists alone), the original length
    # and the factor at the top level, which transformers moves into rope_parameters
    "legacy rope_scaling, 0.75": {"partial_rotary_factor": 0.75, "original_max_position_embeddings": 64,
                                  "max_position_embeddings": 256, LEGACY: longrope(0.75, 6)},
}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made = {}

    def get(name, layers=2):   # 8 layers where an EAGLE-3 draft taps them (its default taps 2, L//2, L-3)
        if (name, layers) not in made:
            over = dict(CASES[name])
            legacy = over.pop(LEGACY, None)
            folder = write_target(tmp_path_factory.mktemp("phi3"), "phi3", num_hidden_layers=layers, **PHI3, **over)
            if legacy is not None:
                cfg = json.loads((folder / "config.json").read_text())
                cfg.pop("rope_parameters")
                lists = {k: legacy[k] for k in ("short_factor", "long_factor")}
                cfg |= {"rope_theta": legacy["rope_theta"], "rope_scaling": {"type": "longrope", **lists}}
                (folder / "config.json").write_text(json.dumps(cfg))
            made[name, layers] = folder
        return made[name, layers]
    return get


def test_the_checkpoint_holds_phi3_s_fused_tensors(targets):
    with safe_open(targets("phi-4 (whole heads)") / "model.safetensors", "pt") as f:
        names = set(f.keys())
    assert {"model.layers.0.self_attn.qkv_proj.weight", "model.layers.0.mlp.gate_up_proj.weight"} <= names
    assert not any(".q_proj." in n or ".gate_proj." in n for n in names)


@pytest.mark.parametrize("name", sorted(CASES))
def test_phi3_logits_match_transformers(targets, name):
    want = reference(targets(name), IDS)
    assert want.std() > 0.1
    torch.testing.assert_close(full_logits(ours(targets(name)), IDS), want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["phi-4-mini (0.75, tied)", "longrope, 0.75", "half, window 4"])
def test_paged_prefill_then_decode_matches_transformers(targets, name):
    folder = targets(name)
    want = reference(folder, IDS[:1])[0]
    model = ours(folder)
    torch.testing.assert_close(paged_logits(model, IDS[0]), want, atol=ATOL, rtol=0)


def edited(folder, tmp_path, **changes):
    """A copy of a target folder whose config.json has ``changes``."""
    out = tmp_path / "edited"
    out.mkdir(parents=True)
    cfg = json.loads((folder / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**cfg, **changes}))
    (out / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    return out


def test_the_rotary_fraction_and_the_window_matter_here(targets, tmp_path):
    """The same weights read with the whole head rotated, or without the window, give other logits: the parity
    tests above would see either mistake (layer_types, which Phi3Model does not read, changes nothing)."""
    folder = targets("half, window 4")
    got = full_logits(ours(folder), IDS)
    whole = edited(folder, tmp_path / "whole", partial_rotary_factor=1.0,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0})
    assert (full_logits(ours(whole), IDS) - got).abs().max() > 1e-2
    wide = edited(folder, tmp_path / "wide", sliding_window=None)
    assert (full_logits(ours(wide), IDS)[:, 5:] - got[:, 5:]).abs().max() > 1e-2
    typed = edited(folder, tmp_path / "typed", layer_types=["full_attention", "full_attention"])
    want = reference(typed, IDS)
    torch.testing.assert_close(full_logits(ours(typed), IDS), want, atol=ATOL, rtol=0)
    torch.testing.assert_close(want, got, atol=ATOL, rtol=0)


def echo_draft(folder, target):
    """An EAGLE-3 draft whose first proposal is the target's own next token: it taps the target's last layer output
    (fc passes it alone), its layer adds nothing (o_proj, down_proj zero) and its norm and head are the target's.
    Its deeper proposals are guesses, so each step accepts some nodes and rejects others: the accepted nodes' keys,
    rotated at their tree positions, are what later steps attend to."""
    src = load_file(str(target / "model.safetensors"))
    layers = len({n.split(".")[2] for n in src if n.startswith("model.layers.")})
    folder = write_eagle3(folder, target, aux_ids=[layers - 2, layers - 1, layers])
    t = load_file(str(folder / "model.safetensors"))
    H = t["norm.weight"].shape[0]
    t["fc.weight"] = torch.cat([torch.zeros(H, 2 * H), torch.eye(H)], 1)
    t["midlayer.self_attn.o_proj.weight"].zero_()
    t["midlayer.mlp.down_proj.weight"].zero_()
    t["norm.weight"] = src["model.norm.weight"].clone()
    t["lm_head.weight"] = src.get("lm_head.weight", src["model.embed_tokens.weight"]).clone()   # tied: the embedding
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


@pytest.mark.parametrize("name", ["phi-4 (whole heads)", "phi-4-mini (0.75, tied)", "longrope, 0.75"])
def test_speculative_decoding_equals_target_only(targets, tmp_path, name):
    folder = targets(name, layers=8)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=echo_draft(tmp_path / "d", folder))
    _, spec = decodes_as_target_only(model, [[1, 5, 9, 3, 4, 6], [7, 8]], max_new_tokens=24)
    assert sum(spec[0].stats.accepted_per_position) > 0   # drafted tokens were taken, not only the target's


@pytest.mark.parametrize("name", ["longrope, 0.75", "legacy rope_scaling, 0.75"])
def test_a_longrope_call_past_the_original_length_is_refused(targets, tmp_path, name):
    """Past original_max_position_embeddings transformers' Phi-3 takes the long factors, which draftsmith does not
    compute: refused before any forward, as for any longrope target (the length read where transformers reads it,
    a legacy config's top-level key included)."""
    folder = targets(name, layers=8)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=write_eagle3(tmp_path / "d", folder))
    with pytest.raises(ArgumentError, match="longrope original_max_position_embeddings is 64"):
        model.generate_baseline([list(range(3, 63))], max_new_tokens=16, stop=[])


REFUSED = {   # name: (config.json changes, what the refusal says)
    "above 1": ({"partial_rotary_factor": 1.5}, "partial_rotary_factor is 1.5; allowed: a number in (0, 1]"),
    "zero": ({"partial_rotary_factor": 0.0}, "partial_rotary_factor is 0.0; allowed: a number in (0, 1]"),
    "no channel": ({"partial_rotary_factor": 0.05}, "partial_rotary_factor 0.05 of a head of 16 rotates 0 channels; "
                                                    "allowed: at least 1 and at most 16"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_rotary_factor_no_rotation_takes_is_refused_before_the_tensors(targets, tmp_path, monkeypatch, name):
    changes, said = REFUSED[name]
    rope = {"rope_type": "default", "rope_theta": 10000.0, **changes}
    folder = edited(targets("phi-4 (whole heads)"), tmp_path, rope_parameters=rope, **changes)
    message = refusal_before_tensors(folder, monkeypatch)
    assert message.startswith(f"{folder / 'config.json'}: phi3 target: {said}"), message
    assert "Fix: use a target whose config.json has an allowed value" in message


TRANSFORMERS_REFUSES = {   # name: (rope_parameters, what transformers' Phi3Config says of it)
    "longrope lists of whole heads beside 0.75": (longrope(0.75, 8), "short_factor field must have length 6, got 8"),
    "a linear rope": ({"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4},
                      "type field must be one of ['longrope'], got linear"),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMERS_REFUSES))
def test_a_rope_transformers_phi3_refuses_is_said_naming_the_file(targets, tmp_path, monkeypatch, name):
    """Phi-3's config class computes default and longrope only, with factor lists of the rotated pairs: what it
    refuses draftsmith says naming the file, before any tensor is read."""
    rope, said = TRANSFORMERS_REFUSES[name]
    folder = edited(targets("longrope, 0.75"), tmp_path, rope_parameters=rope)
    message = refusal_before_tensors(folder, monkeypatch, CheckpointError)
    assert message.startswith(f"{folder / 'config.json'}: transformers cannot read it"), message
    assert said in message


def test_a_fused_tensor_of_other_rows_is_refused_naming_it(targets, tmp_path):
    """A qkv_proj whose rows are not q + k + v's (a checkpoint of other head counts) is refused before any data is
    read, naming the fused tensor: the split sizes its parts from the model, never guesses."""
    folder = edited(targets("phi-4 (whole heads)"), tmp_path, num_key_value_heads=4)
    with pytest.raises(CheckpointMismatch, match=r"fused 'model\.layers\.\{0,1\}\.self_attn\.qkv_proj\.weight' is "
                                                  r"\[128, 64\] .* must be their rows stacked, \[192, 64\]"):
        ours(folder)
