"""The ``attention: gqa`` component: its params and factory (the module itself is
:class:`draftsmith.components.attention.GQAttention`)."""
from __future__ import annotations

from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict
from torch import nn

from draftsmith.components.attention import GQAttention
from draftsmith.components.dims import Dims
from draftsmith.components.rope import Rotary


class GQAParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rope: Literal["neox", "interleaved"] = "neox"
    qkv_bias: Literal["auto"] | bool = "auto"   # auto: config `qkv_bias` / `attention_bias`, else false
    qk_norm: bool = False


def gqa(params: GQAParams, *, dims: Dims, layer_idx: int, in_width: int, backend: Callable,
        norm: Callable[[int], nn.Module], **_) -> GQAttention:
    cfg = dims.config
    bias = params.qkv_bias
    if bias == "auto":
        bias = bool(getattr(cfg, "qkv_bias", False) or getattr(cfg, "attention_bias", False))
    o_bias = bool(getattr(cfg, "attention_bias", False))
    return GQAttention(
        dims, in_width=in_width, layer_idx=layer_idx, rope=Rotary(cfg, dims.head_dim, params.rope),
        backend=backend, qkv_bias=bias, o_bias=o_bias,
        q_norm=norm(dims.head_dim) if params.qk_norm else None,
        k_norm=norm(dims.head_dim) if params.qk_norm else None,
    )
