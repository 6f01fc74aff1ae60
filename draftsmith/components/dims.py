"""Sizes of a transformer read once from a transformers config (the one place config keys become numbers)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PretrainedConfig


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
