"""Round 37b: rope.py's per-layer-type ropes (Gemma-3) - layer_rope_type is None where the config lists no layer
types or none for the layer, parity_limit reads the layer type's own rope, and inv_freq_for / Rotary rotate the
whole head unless asked for partial rotation."""
from types import SimpleNamespace

from transformers import LlamaConfig

from draftsmith.components.rope import Rotary, inv_freq_for, layer_rope_type

PER_TYPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e6}}


def test_layer_rope_type_without_a_listed_type_is_none():
    assert layer_rope_type(SimpleNamespace(rope_parameters=PER_TYPE), 0) is None   # no layer_types
    cfg = SimpleNamespace(rope_parameters=PER_TYPE, layer_types=["sliding_attention", "full_attention"])
    assert [layer_rope_type(cfg, i) for i in range(4)] == ["sliding_attention", "full_attention", None, None]
    assert layer_rope_type(SimpleNamespace(rope_parameters={"rope_type": "default"}, layer_types=["x"]), 0) is None


def test_parity_limit_reads_the_layer_type_s_rope():
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, vocab_size=32,
                      max_position_embeddings=64)
    cfg.rope_parameters, cfg.rope_theta = {k: dict(v) for k, v in PER_TYPE.items()}, 10000.0
    assert Rotary(cfg, 16, layer_type="full_attention").parity_limit(("dynamic",)) == 64
    assert Rotary(cfg, 16, layer_type="sliding_attention").parity_limit(("dynamic",)) is None


def test_partial_rotation_only_when_asked():
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, vocab_size=32)
    cfg.partial_rotary_factor = cfg.rope_parameters["partial_rotary_factor"] = 0.5
    cfg.rope_parameters["rope_theta"] = 10000.0
    assert inv_freq_for(cfg, 16)[0].shape == (8,)
    assert inv_freq_for(cfg, 16, True)[0].shape == (4,)
    assert Rotary(cfg, 16).partial is False
