"""The one function that stacks registered parts into decoder layers for both the target and the draft (so a
spec's ``draft.layer/attention/mlp/norm`` are read in exactly one place). The parts' factories live with their
modules in :mod:`draftsmith.components`; this module only resolves names through the registry and stacks."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from torch import nn

from draftsmith.components.dims import Dims
from draftsmith.components.layers import own_input
from draftsmith.registry import Registry
from draftsmith.specs.resolve import resolve


@dataclass(frozen=True)
class LayerRecipe:
    """Which registered parts make a decoder layer: (name, params) for layer, attention, mlp and norm."""

    layer: tuple[str, dict[str, Any]] = ("llama", {})
    attention: tuple[str, dict[str, Any]] = ("gqa", {})
    mlp: tuple[str, dict[str, Any]] = ("swiglu", {})
    norm: tuple[str, dict[str, Any]] = ("rms", {})
    sparse_mlp: tuple[str, dict[str, Any]] | None = None   # the MLP of the layers Stacker.layer is told are sparse


class Stacker:
    """Builds decoder layers from a recipe; resolves each named part once."""

    def __init__(self, registry: Registry, recipe: LayerRecipe, dims: Dims, backend: Callable):
        self.dims, self.backend = dims, backend
        self.parts: dict[str, Callable[..., nn.Module]] = {}   # kind -> make(**context), through Registry.build
        for kind in ("layer", "attention", "mlp", "norm"):
            name, params = getattr(recipe, kind)
            self.parts[kind] = partial(registry.build, kind, name, resolve(registry, kind, name, params)[1])
        if recipe.sparse_mlp is not None:
            name, params = recipe.sparse_mlp
            self.parts["sparse_mlp"] = partial(registry.build, "moe", name, resolve(registry, "moe", name, params)[1])

    def norm(self, dim: int, eps: float | None = None) -> nn.Module:
        return self.parts["norm"](dim=dim, eps=self.dims.eps if eps is None else eps)

    def layer(self, idx: int, *, in_width: int, input_norm: bool = True, hidden_norm: bool = False,
              mix=own_input, norm_before_residual: bool = False, sparse: bool = False) -> nn.Module:
        attn = self.parts["attention"](dims=self.dims, layer_idx=idx, in_width=in_width, backend=self.backend,
                                       norm=self.norm)
        mlp = self.parts["sparse_mlp" if sparse else "mlp"](dims=self.dims)
        return self.parts["layer"](attn=attn, mlp=mlp, norm=self.norm, dims=self.dims,
                                   input_norm=input_norm, hidden_norm=hidden_norm, mix=mix,
                                   norm_before_residual=norm_before_residual)
