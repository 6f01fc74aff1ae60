"""Mutation survivors of draftsmith.components.dims: the head size a config without ``head_dim`` gets
(hidden_size // num_attention_heads), an explicit ``head_dim`` kept as written, and ``Dims.unstated``'s default
(``heads=True``: the KV-head count and the head size are reported with the other sizes a config leaves out)."""
from transformers import LlamaConfig, Qwen2Config

from draftsmith.components.dims import Dims


# catches dims.py:27 cfg.hidden_size // heads -> cfg.hidden_size * heads
# catches dims.py:27 getattr(cfg, 'head_dim', None) or ... -> and
def test_a_config_without_head_dim_gets_hidden_size_over_heads():
    cfg = Qwen2Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=40)
    assert getattr(cfg, "head_dim", None) is None   # Qwen2Config keeps no head_dim of its own
    dims = Dims.from_config(cfg)
    assert (dims.head_dim, dims.heads, dims.kv_heads, dims.hidden) == (16, 4, 2, 64)


# catches dims.py:27 getattr(cfg, 'head_dim', None) or ... -> and (the written head_dim replaced by 64 // 4)
def test_an_explicit_head_dim_is_kept_even_when_it_is_not_hidden_over_heads():
    dims = Dims.from_config(LlamaConfig(hidden_size=64, num_attention_heads=4, head_dim=32, intermediate_size=40))
    assert dims.head_dim == 32


# catches dims.py:40 heads: bool = True -> False (the default reports num_key_value_heads and head_dim too)
def test_unstated_by_default_reports_the_head_sizes_too():
    dims = Dims.from_config(LlamaConfig(hidden_size=64, num_attention_heads=4, intermediate_size=40))
    assert dims.unstated({}) == [
        "rms_norm_eps not stated: 1e-06 taken (LlamaConfig's default)",
        "intermediate_size not stated: 40 taken (LlamaConfig's default)",
        "num_key_value_heads not stated: 4 taken (num_attention_heads: one KV head per head)",
        "head_dim not stated: 16 taken (hidden_size 64 / num_attention_heads 4)",
    ]
    assert dims.unstated({}, heads=False) == dims.unstated({})[:2]


# catches dims.py:52 raw.get(k) is None -> is not None (only what the file leaves out is reported)
# catches dims.py:40 heads: bool = True -> False (head_dim, left out, is reported by default)
def test_unstated_names_only_the_keys_the_file_leaves_out_under_their_written_names():
    dims = Dims.from_config(LlamaConfig(hidden_size=64, num_attention_heads=4, intermediate_size=40))
    raw = {"rms_norm_eps": 1e-6, "intermediate_size": 40, "num_key_value_heads": 4}
    assert dims.unstated(raw, lambda k: f"text_config.{k}") == [
        "text_config.head_dim not stated: 16 taken (text_config.hidden_size 64 / text_config.num_attention_heads 4)"]
    assert dims.unstated({**raw, "head_dim": 16}) == []
