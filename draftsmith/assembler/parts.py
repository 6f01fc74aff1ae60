"""Factories of the built-in layer parts, and the one function that stacks them into decoder layers for both the
target and the draft (so a spec's ``draft.layer/attention/mlp/norm`` are read in exactly one place)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import nn

from draftsmith.components.attention import GQAttention
from draftsmith.components.dims import Dims
from draftsmith.components.layers import DecoderLayer, own_input
from draftsmith.components.mlp import SwiGLU
from draftsmith.components.norms import RMSNorm
from draftsmith.components.rope import Rotary
from draftsmith.registry import Registry
from draftsmith.specs.resolve import resolve


def rms(params, *, dim: int, eps: float) -> RMSNorm:
    return RMSNorm(dim, eps)


def swiglu(params, *, dims: Dims) -> SwiGLU:
    return SwiGLU(dims.hidden, dims.intermediate, bias=params.bias)


def gqa(params, *, dims: Dims, layer_idx: int, in_width: int, backend: Callable, norm: Callable[[int], nn.Module],
        **_) -> GQAttention:
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


def llama_layer(params, *, attn: nn.Module, mlp: nn.Module, norm: Callable[[int], nn.Module], dims: Dims,
                input_norm: bool, hidden_norm: bool, mix=own_input, norm_before_residual: bool = False,
                **_) -> DecoderLayer:
    return DecoderLayer(
        attn, mlp,
        input_layernorm=norm(dims.hidden) if input_norm else None,
        post_attention_layernorm=norm(dims.hidden),
        hidden_norm=norm(dims.hidden) if hidden_norm else None,
        mix=mix, norm_before_residual=norm_before_residual,
    )


@dataclass(frozen=True)
class LayerRecipe:
    """Which registered parts make a decoder layer: (name, params) for layer, attention, mlp and norm."""

    layer: tuple[str, dict[str, Any]] = ("llama", {})
    attention: tuple[str, dict[str, Any]] = ("gqa", {})
    mlp: tuple[str, dict[str, Any]] = ("swiglu", {})
    norm: tuple[str, dict[str, Any]] = ("rms", {})


class Stacker:
    """Builds decoder layers from a recipe; resolves each named part once."""

    def __init__(self, registry: Registry, recipe: LayerRecipe, dims: Dims, backend: Callable):
        self.dims, self.backend = dims, backend
        parts = {k: resolve(registry, k, *getattr(recipe, k)) for k in ("layer", "attention", "mlp", "norm")}
        self.parts = {k: (comp.factory, params) for k, (comp, params) in parts.items()}

    def norm(self, dim: int) -> nn.Module:
        make, params = self.parts["norm"]
        return make(params, dim=dim, eps=self.dims.eps)

    def layer(self, idx: int, *, in_width: int, input_norm: bool = True, hidden_norm: bool = False,
              mix=own_input, norm_before_residual: bool = False) -> nn.Module:
        (make_layer, lp), (make_attn, ap), (make_mlp, mp) = (self.parts[k] for k in ("layer", "attention", "mlp"))
        attn = make_attn(ap, dims=self.dims, layer_idx=idx, in_width=in_width, backend=self.backend, norm=self.norm)
        return make_layer(lp, attn=attn, mlp=make_mlp(mp, dims=self.dims), norm=self.norm, dims=self.dims,
                          input_norm=input_norm, hidden_norm=hidden_norm, mix=mix,
                          norm_before_residual=norm_before_residual)
