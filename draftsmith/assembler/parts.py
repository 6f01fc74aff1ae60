"""The one function that stacks registered parts into decoder layers for both the target and the draft (so a
spec's ``draft.layer/attention/mlp/norm`` are read in exactly one place). The parts' factories live with their
modules in :mod:`draftsmith.components`; this module only resolves names through the registry and stacks (and says
which of a draft's layers continue a target's mixture-of-experts stack: :func:`continued_moe`)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from torch import nn

from draftsmith.components.dims import Dims
from draftsmith.components.layers import own_input
from draftsmith.components.targets import moe_check, moe_recipe, target_record
from draftsmith.errors import Problem
from draftsmith.registry import Registry
from draftsmith.specs.resolve import resolve

if TYPE_CHECKING:
    from draftsmith.specs.schema import Spec


@dataclass(frozen=True)
class LayerRecipe:
    """Which registered parts make a decoder layer: (name, params) for layer, attention, mlp and norm."""

    layer: tuple[str, dict[str, Any]] = ("llama", {})
    attention: tuple[str, dict[str, Any]] = ("gqa", {})
    mlp: tuple[str, dict[str, Any]] = ("swiglu", {})
    norm: tuple[str, dict[str, Any]] = ("rms", {})
    sparse_mlp: tuple[str, dict[str, Any]] | None = None   # the MLP of the layers Stacker.layer is told are sparse


def target_recipe(arch: Any, sparse: bool) -> LayerRecipe:
    """A target type's layer recipe from its record (TargetArch; a plugin's record may state only some parts): its
    attention, its MLP's bias (the type's, else (auto) Llama's mlp_bias key) and other MLP params, its layer's and
    norm's params, and where it has mixture-of-experts layers (``sparse``), its moe recipe."""
    stated = getattr(arch, "mlp_bias", None)
    mlp = ({} if stated is None else {"bias": stated}) | dict(getattr(arch, "mlp_params", ()))
    return LayerRecipe(layer=("llama", dict(getattr(arch, "layer_params", ()))), attention=arch.attention_recipe(),
                       mlp=("swiglu", mlp), norm=("rms", dict(getattr(arch, "norm_params", ()))),
                       sparse_mlp=moe_recipe(arch) if sparse else None)


def target_scales(arch: Any, cfg) -> dict[str, float | None]:
    """CausalLM's embed_scale and logit_cap as a target type's record says (none where it says nothing): the
    embedding times sqrt(hidden_size) (``embed_scale``), the logits capped by the config's ``logit_cap`` key."""
    cap = getattr(cfg, arch.logit_cap, None) if getattr(arch, "logit_cap", None) else None
    return {"embed_scale": cfg.hidden_size**0.5 if getattr(arch, "embed_scale", False) else None,
            "logit_cap": None if cap is None else float(cap)}


class Stacker:
    """Builds decoder layers from a recipe; resolves each named part once."""

    def __init__(self, registry: Registry, recipe: LayerRecipe, dims: Dims, backend: Callable,
                 sparse_dims: Dims | None = None):
        self.dims, self.backend = dims, backend
        self.sparse_dims = sparse_dims or dims   # the config the sparse MLP reads (a draft's: its target's)
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
        mlp = self.parts["sparse_mlp"](dims=self.sparse_dims) if sparse else self.parts["mlp"](dims=self.dims)
        return self.parts["layer"](attn=attn, mlp=mlp, norm=self.norm, dims=self.dims,
                                   input_norm=input_norm, hidden_norm=hidden_norm, mix=mix,
                                   norm_before_residual=norm_before_residual)


def continued_moe(spec: Spec, registry: Registry, target_cfg, hidden: int) -> tuple[Any, Dims | None, Callable]:
    """``draft.moe: as_target`` (an MTP layer continues the target's stack at index L = num_hidden_layers): the
    target type's ``moe: sparse`` recipe, the target's Dims (its router and experts read the target's config), and
    of a layer count, the draft layers i whose index L + i the type makes MoE (TargetArch.moe_layers), their router
    settings checked as the target's. (None, None, none) for ``none`` or a type without MoE layers."""
    arch = target_record(registry, getattr(target_cfg, "model_type", None)) if spec.draft.moe == "as_target" else None
    if not getattr(arch, "moe", ()) or not callable(getattr(arch, "moe_layers", None)):
        return None, None, lambda count: set()
    L, target_dims = target_cfg.num_hidden_layers, Dims.from_config(target_cfg)

    def layers(count: int) -> set[int]:
        found = {i - L for i in arch.moe_layers(target_cfg, L + count) if i >= L}
        if found and target_dims.hidden != hidden:
            raise spec.error([Problem("draft.moe", f"as_target: the target's mixture of experts is "
                                      f"{target_dims.hidden} wide and the draft's hidden size {hidden}",
                                      found="as_target", allowed="none (a draft of the target's width for as_target)")])
        if found:
            moe_check(target_cfg, arch)   # UnsupportedTarget: a router setting not computed (the target's all dense)
        return found
    return moe_recipe(arch), target_dims, layers
