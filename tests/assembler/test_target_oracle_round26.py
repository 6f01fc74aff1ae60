"""What the target oracle hunt of round 26 found, held to transformers' logits (float32, 1e-4):
- a type's biases follow its modeling code, not the config's keys: Mistral (and Ministral) have none, Qwen2 q/k/v
  biases only, Qwen3 no MLP biases, whatever attention_bias / mlp_bias say (a file such a config came with loaded
  refused, and with the bias tensors in it, loaded and computed other logits than transformers, which drops them);
- a mistral config.json with a layer_types key is transformers' Ministral (its AutoConfig says so): it loads;
- DeepSeek-V3's latent norms (q_a_layernorm, kv_a_layernorm) have eps 1e-6 whatever rms_norm_eps says;
- rope frequencies that do not fit the heads (partial_rotary_factor below 1 beside a scaled rope, longrope factor
  lists of another length), or differ by layer type (one rope per layer type: read as the default before), are a
  CheckpointError naming the keys, before any tensor is read (were a RuntimeError at the first forward, after every
  tensor was loaded)."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.errors import CheckpointError
from draftsmith.testing import write_target
from draftsmith.testing.mla import MLA_SIZES
from test_targets_zoo import ATOL, IDS, full_logits, ours, reference

BIASES = {"attention_bias": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp_bias": ("gate_proj", "up_proj", "down_proj")}


def with_biases(folder, names):
    tensors = load_file(folder / "model.safetensors")
    g = torch.Generator().manual_seed(1)
    for k in list(tensors):
        if k.endswith(".weight") and any(f".{n}." in k for n in names) and k[:-6] + "bias" not in tensors:
            tensors[k[:-6] + "bias"] = torch.randn(tensors[k].shape[0], generator=g) * 0.5
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize("model_type, flag", [("mistral", "attention_bias"), ("mistral", "mlp_bias"),
                                              ("qwen2", "attention_bias"), ("qwen2", "mlp_bias"),
                                              ("qwen3", "mlp_bias")])
def test_a_bias_key_the_type_s_model_has_no_use_for_is_ignored_as_transformers_does(tmp_path, model_type, flag):
    folder = write_target(tmp_path / "t", model_type, num_hidden_layers=2, seed=3, **{flag: True})
    torch.testing.assert_close(full_logits(ours(folder), IDS), reference(folder, IDS), atol=ATOL, rtol=0)
    with_biases(folder, BIASES[flag])   # transformers drops them: draftsmith refuses them, never adds them
    with pytest.raises(CheckpointMismatch, match=r"unexpected: .*_proj\.bias"):
        ours(folder)


@pytest.mark.parametrize("flag", sorted(BIASES))
def test_llama_still_reads_both_bias_keys(tmp_path, flag):
    folder = write_target(tmp_path / "t", "llama", num_hidden_layers=2, seed=3, **{flag: True})
    model = ours(folder)
    torch.testing.assert_close(full_logits(model, IDS), reference(folder, IDS), atol=ATOL, rtol=0)
    assert model.model.layers[0].mlp.down_proj.bias is not None or flag == "attention_bias"
    assert model.model.layers[0].self_attn.o_proj.bias is not None or flag == "mlp_bias"


@pytest.mark.parametrize("layer_types", [["sliding_attention", "full_attention"], None])
def test_a_mistral_config_with_layer_types_loads_as_transformers_ministral(tmp_path, layer_types):
    folder = write_target(tmp_path / "t", "mistral", num_hidden_layers=2, sliding_window=4)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "layer_types": layer_types}))
    want = reference(folder, IDS)   # 20 positions past a window of 4
    torch.testing.assert_close(full_logits(ours(folder), IDS), want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("q_lora_rank", [24, None])
def test_deepseek_v3_latent_norms_keep_eps_1e_6(tmp_path, q_lora_rank):
    folder = write_target(tmp_path / "t", "deepseek_v3", num_hidden_layers=2, seed=7, num_key_value_heads=4,
                          first_k_dense_replace=2, rms_norm_eps=1e-2, init_std=0.02,
                          **{**MLA_SIZES, "q_lora_rank": q_lora_rank})
    model = ours(folder)
    assert model.model.layers[0].self_attn.kv_a_layernorm.eps == 1e-6
    assert model.model.layers[0].input_layernorm.eps == 1e-2
    want = reference(folder, IDS)
    torch.testing.assert_close(full_logits(model, IDS), want, atol=ATOL, rtol=0)


ROPES = {
    "linear, partial": ({"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0, "partial_rotary_factor": 0.5},
                        {}, "rope_type 'linear' gives 4 rotary frequencies where a head of 16 rotates 8 pairs "
                            "(partial_rotary_factor: 0.5); draftsmith rotates whole heads"),
    "yarn, partial at the top": ({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0},
                                 {"partial_rotary_factor": 0.5}, "rope_type 'yarn' gives 4 rotary frequencies"),
    "one per layer type": ({"full_attention": {"rope_type": "default", "rope_theta": 1e4},   # Qwen2's config keeps
                            "sliding_attention": {"rope_type": "default", "rope_theta": 1e6}},   # them (Llama's adds a
                           {"model_type": "qwen2"},   # default beside them, which transformers and draftsmith read)
                           "rope_parameters holds one rope per layer type (full_attention, sliding_attention), "
                           "where draftsmith rotates every layer alike"),
    "longrope, short lists": ({"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 3,
                               "long_factor": [1.0] * 3, "original_max_position_embeddings": 64}, {},
                              "transformers cannot compute its longrope frequencies"),
}


@pytest.mark.parametrize("name", sorted(ROPES))
def test_rope_frequencies_that_do_not_fit_the_heads_are_said_before_the_tensors(tmp_path, monkeypatch, name):
    rope, top, said = ROPES[name]
    folder = write_target(tmp_path / "t", "llama", num_hidden_layers=2)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, **top, "rope_parameters": rope}))
    from draftsmith.assembler import load

    monkeypatch.setattr(load, "read_tensors", lambda *a, **k: pytest.fail("tensors read"))
    with pytest.raises(CheckpointError) as err:
        ours(folder)
    assert str(err.value).startswith(f"{folder}: {said}"), str(err.value)


def test_a_rope_per_layer_type_beside_the_default_transformers_adds_is_read_as_transformers_does(tmp_path):
    """Llama's config standardizes one rope per layer type by adding a default rope_type and rope_theta beside them,
    which transformers computes with: so does draftsmith (only a mapping made of per-type ropes alone is refused)."""
    folder = write_target(tmp_path / "t", "llama", num_hidden_layers=2)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 1e4},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e6}}}))
    torch.testing.assert_close(full_logits(ours(folder), IDS), reference(folder, IDS), atol=ATOL, rtol=0)
