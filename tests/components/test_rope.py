"""rope.py's frequencies and buffers against transformers' own rotary embeddings (LlamaRotaryEmbedding).

test_components.py checks the rotation itself (neox against transformers, interleaved as a permutation of it).
"""
import types

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from draftsmith.components.rope import Rotary, inv_freq_for

ROPES = {
    "default": None,
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
    "llama3": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
    "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64},
}


def llama(rope: dict | None, head_dim: int = 16) -> LlamaConfig:
    over = {"rope_parameters": dict(rope)} if rope else {"rope_theta": 20000.0}
    return LlamaConfig(hidden_size=4 * head_dim, num_attention_heads=4, max_position_embeddings=256, **over)


@pytest.mark.parametrize("head_dim", [6, 16])
@pytest.mark.parametrize("kind", sorted(ROPES))
def test_frequencies_and_scaling_match_transformers(kind, head_dim):
    cfg = llama(ROPES[kind], head_dim)
    ref = LlamaRotaryEmbedding(cfg)
    inv, scale = inv_freq_for(cfg, head_dim)
    assert inv.dtype == torch.float32 and inv.shape == (head_dim // 2,)
    torch.testing.assert_close(inv, ref.inv_freq.float(), atol=0, rtol=1e-6)
    assert scale == pytest.approx(ref.attention_scaling)


def test_yarn_rotation_with_attention_scaling_matches_transformers():
    cfg = llama(ROPES["yarn"])
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 5, 4, 16, generator=g) for _ in range(2))  # [B, T, heads, d]
    pos = torch.randint(0, 200, (2, 5), generator=g)
    cos, sin = LlamaRotaryEmbedding(cfg)(q, pos)                     # cos and sin carry attention_scaling
    want_q, want_k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
    got_q, got_k = Rotary(cfg, 16, "neox")(q, k, pos)
    torch.testing.assert_close(got_q, want_q.transpose(1, 2), atol=1e-5, rtol=0)
    torch.testing.assert_close(got_k, want_k.transpose(1, 2), atol=1e-5, rtol=0)


def test_theta_comes_from_a_plain_config_attribute_else_10000():
    # configs without rope_parameters (older or hand-made ones): theta ** (-2i/d), i = 0 .. d/2 - 1
    i = torch.arange(4, dtype=torch.float64)
    for cfg, theta in [(types.SimpleNamespace(rope_theta=500.0), 500.0), (types.SimpleNamespace(), 10000.0)]:
        inv, scale = inv_freq_for(cfg, 8)
        torch.testing.assert_close(inv, (theta ** (-2 * i / 8)).float(), atol=0, rtol=1e-6)
        assert scale == 1.0


def test_an_unknown_rope_type_is_refused_naming_the_known_ones():
    cfg = types.SimpleNamespace(rope_parameters={"rope_type": "spiral", "rope_theta": 10000.0})
    with pytest.raises(ValueError, match=r"rope_type 'spiral' is not known to transformers; known: default, .*yarn"):
        inv_freq_for(cfg, 8)


def test_frequencies_are_not_checkpoint_tensors_and_follow_reset_to_a_device():
    rot = Rotary(llama(None), 16)
    assert rot.state_dict() == {}                                    # computed, never loaded or saved
    assert rot.inv_freq.shape == (8,) and torch.isfinite(rot.inv_freq).all()
    rot.reset_buffers(device="meta")
    assert rot.inv_freq.device.type == "meta" and rot.inv_freq.shape == (8,)


def test_a_rotary_built_on_meta_holds_real_frequencies():
    with torch.device("meta"):
        rot = Rotary(llama(None), 16)
    torch.testing.assert_close(rot.inv_freq, LlamaRotaryEmbedding(llama(None)).inv_freq.float(), atol=0, rtol=1e-6)


def test_a_new_rotary_runs_the_eager_function_until_fuse_model_switches_it():
    # fused.wanted keeps every CPU run eager; a Rotary that started fused would compile on its first call
    assert Rotary(llama(None), 16).fused is False
