"""Gemma-1 targets (``gemma``: Gemma 2B / 7B, CodeGemma), written by transformers itself (``save_pretrained``,
float32): Gemma's RMSNorms of weights stored as offsets from 1, the embedding times sqrt(hidden_size), GeGLU MLPs,
but Llama's two norms a layer, head_dim ** -0.5 and no cap; q/k/v/o biases by attention_bias; tied or not. Each
gives transformers' logits (float32, 1e-4) over a whole sequence and through the paged pool; greedy speculative
decoding equals target-only. The MLP's activation is ``hidden_act`` (transformers 5's GemmaMLP; GemmaConfig reads the
Hub's legacy "gelu" as gelu_pytorch_tanh; a hidden_activation key is unread): another one is refused by name before
any tensor is read."""
import pytest
import torch
from safetensors.torch import load_file

import draftsmith
from draftsmith.testing import write_target
from draftsmith.testing.decoding import decodes_as_target_only
from test_gemma_targets import gemma_echo_draft
from test_phi3_target import edited
from test_targets_zoo import ATOL, IDS, full_logits, ours, paged_logits, reference, refusal_before_tensors

CASES = {   # name: write_target overrides (head_dim 16: Gemma's config states its own, 256 by default)
    "gemma-2b (MQA, tied)": {"head_dim": 16, "num_key_value_heads": 1},
    "gemma-7b (MHA, biases, untied)": {"head_dim": 16, "num_key_value_heads": 4, "attention_bias": True,
                                       "tie_word_embeddings": False},
    "wide heads (head_dim 24)": {"head_dim": 24},
}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made = {}

    def get(name, layers=3):   # 8 layers where an EAGLE-3 draft taps them
        if (name, layers) not in made:
            made[name, layers] = write_target(tmp_path_factory.mktemp("gemma1"), "gemma", num_hidden_layers=layers,
                                              **CASES[name])
        return made[name, layers]
    return get


def test_the_checkpoints_hold_llama_s_two_norms_a_layer(targets):
    names = set(load_file(str(targets("gemma-2b (MQA, tied)") / "model.safetensors")))
    layer = {n.removeprefix("model.layers.0.") for n in names if n.startswith("model.layers.0.")}
    assert {n for n in layer if "norm" in n} == {"input_layernorm.weight", "post_attention_layernorm.weight"}
    assert "lm_head.weight" not in names   # tied
    biased = set(load_file(str(targets("gemma-7b (MHA, biases, untied)") / "model.safetensors")))
    assert {f"model.layers.0.self_attn.{p}_proj.bias" for p in "qkvo"} | {"lm_head.weight"} <= biased


@pytest.mark.parametrize("name", sorted(CASES))
def test_gemma1_logits_match_transformers(targets, name):
    want = reference(targets(name), IDS)
    assert want.std() > 0.1
    torch.testing.assert_close(full_logits(ours(targets(name)), IDS), want, atol=ATOL, rtol=0)


def test_paged_prefill_then_decode_matches_transformers(targets):
    folder = targets("gemma-7b (MHA, biases, untied)")
    torch.testing.assert_close(paged_logits(ours(folder), IDS[0]), reference(folder, IDS[:1])[0], atol=ATOL, rtol=0)


@pytest.mark.parametrize("changes", [{"hidden_act": "gelu"}, {"hidden_act": "gelu", "hidden_activation": "gelu"},
                                     {"hidden_activation": "silu"}])
def test_the_hub_s_config_loads_as_transformers_reads_it(targets, tmp_path, changes):
    """The Hub's Gemma config.json states hidden_act "gelu" (GemmaConfig reads it as gelu_pytorch_tanh: the generic
    silu check leaves it to the gemma record), often beside hidden_activation, which transformers 5's Gemma does not
    read whatever it says: the logits are transformers'."""
    folder = edited(targets("gemma-2b (MQA, tied)"), tmp_path, **changes)
    torch.testing.assert_close(full_logits(ours(folder), IDS), reference(folder, IDS), atol=ATOL, rtol=0)


def test_the_embedding_scale_matters_here(targets):
    """Without the embedding's factor the same weights give other logits: the parity tests above would see it."""
    model = ours(targets("gemma-2b (MQA, tied)"))
    got = full_logits(model, IDS)
    assert model.embed_scale == 64**0.5
    model.embed_scale = None
    assert (full_logits(model, IDS) - got).abs().max() > 1e-2


REFUSED = {   # name: (config.json changes, what the refusal says)
    "exact gelu": ({"hidden_act": "gelu_new"}, "hidden_act='gelu_new', which draftsmith does not compute; allowed: "
                                               "'gelu_pytorch_tanh' (or the key absent)"),
    "silu": ({"hidden_act": "silu"}, "hidden_act='silu', which draftsmith does not compute"),
    "bidirectional": ({"use_bidirectional_attention": True}, "use_bidirectional_attention=True, which draftsmith "
                                                             "does not compute; allowed: False (or the key absent)"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_is_not_computed_is_refused_before_the_tensors(targets, tmp_path, monkeypatch, name):
    changes, said = REFUSED[name]
    folder = edited(targets("gemma-2b (MQA, tied)"), tmp_path, **changes)
    message = refusal_before_tensors(folder, monkeypatch)
    assert message.startswith(f"{folder / 'config.json'}: gemma target: {said}"), message
    assert "Fix: use a target whose config.json has an allowed value" in message


@pytest.mark.parametrize("name", ["gemma-2b (MQA, tied)", "gemma-7b (MHA, biases, untied)"])
def test_speculative_decoding_equals_target_only(targets, tmp_path, name):
    folder = targets(name, layers=8)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=gemma_echo_draft(tmp_path / "d", folder))
    _, spec = decodes_as_target_only(model, [[1, 5, 9, 3, 4, 6], [7, 8]], max_new_tokens=24)
    assert sum(spec[0].stats.accepted_per_position) > 0   # drafted tokens were taken, not only the target's
