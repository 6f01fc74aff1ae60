"""Round 37b: ``qk_norm: config`` (GLM-4.5's use_qk_norm) builds no q/k norms from a config that does not state the
key (its model's default: none), and builds them where the key is true."""
from transformers import LlamaConfig

from draftsmith.components import backends
from draftsmith.components.dims import Dims
from draftsmith.components.gqa import GQAParams, gqa
from draftsmith.components.norms import RMSNorm


def _attn(**over):
    cfg = LlamaConfig(hidden_size=16, num_attention_heads=4, num_key_value_heads=2, intermediate_size=32,
                      num_hidden_layers=2, vocab_size=32)
    for k, v in over.items():
        setattr(cfg, k, v)
    return gqa(GQAParams(qk_norm="config"), dims=Dims.from_config(cfg), layer_idx=1, in_width=16,
               backend=backends.sdpa, norm=RMSNorm)


def test_qk_norm_config_unstated_is_none():
    assert not hasattr(LlamaConfig(), "use_qk_norm")
    attn = _attn()
    assert not isinstance(attn.q_norm, RMSNorm) and not isinstance(attn.k_norm, RMSNorm)
    attn = _attn(use_qk_norm=True)
    assert isinstance(attn.q_norm, RMSNorm) and isinstance(attn.k_norm, RMSNorm)
