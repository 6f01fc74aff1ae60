"""Sizes of a transformer read once from a transformers config (the one place config keys become numbers)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def per_layer_type(params: Any) -> bool:
    """Whether a ``rope_parameters`` / ``rope_scaling`` value holds one rope per layer type (Gemma-3 style, as
    Qwen2's config keeps it): a non-empty mapping of mappings."""
    return isinstance(params, Mapping) and bool(params) and all(isinstance(v, Mapping) for v in params.values())

@dataclass(frozen=True)
class Dims:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float
    vocab: int
    layers: int
    config: PretrainedConfig  # kept for rotary frequencies

    @classmethod
    def from_config(cls, cfg: PretrainedConfig) -> "Dims":
        heads = cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        return cls(
            hidden=cfg.hidden_size,
            heads=heads,
            kv_heads=getattr(cfg, "num_key_value_heads", None) or heads,
            head_dim=head_dim,
            intermediate=cfg.intermediate_size,
            eps=float(getattr(cfg, "rms_norm_eps", 1e-6)),
            vocab=cfg.vocab_size,
            layers=cfg.num_hidden_layers,
            config=cfg,
        )

    def unstated(self, raw: Mapping[str, Any], key: Callable[[str], str] = str, *, heads: bool = True,
                 hints: Mapping[str, str] | None = None) -> list[str]:
        """What these sizes took for the keys ``raw`` (the config as written, flat) does not state, one
        'key not stated: value taken (why)' each, for the load to say (a default is never taken silently).
        ``key``: the name each key is written under in the file; ``heads``: whether the attention reads
        num_key_value_heads and head_dim (latent attention has sizes of its own); ``hints``: words to add after a
        key's line (the key the config may hold it under)."""
        source = f"{type(self.config).__name__}'s default"
        taken = {"rms_norm_eps": (f"{self.eps:g}", source), "intermediate_size": (self.intermediate, source)}
        if heads:
            taken |= {"num_key_value_heads": (self.kv_heads, f"{key('num_attention_heads')}: one KV head per head"),
                      "head_dim": (self.head_dim, f"{key('hidden_size')} {self.hidden} / {key('num_attention_heads')} "
                                                  f"{self.heads}")}
        hints = hints or {}
        return [f"{key(k)} not stated: {value} taken ({why}){hints.get(k, '')}" for k, (value, why) in taken.items()
                if raw.get(k) is None]
