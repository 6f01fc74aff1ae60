"""The ``attention: gqa`` component: its params and factory (the module itself is
:class:`draftsmith.components.attention.GQAttention`), and how ``qkv_bias: auto`` reads a config."""
from __future__ import annotations

from typing import Any, Callable

from torch import nn

from draftsmith.components.attention import GQAttention
from draftsmith.components.dims import Dims
from draftsmith.components.params import GQAParams
from draftsmith.components.rope import Rotary, warn_stored_order, with_theta

BIAS_KEYS = ("qkv_bias", "attention_bias")   # what a config may state about q/k/v biases, the first one stated wins


def stated_qkv_bias(cfg: Any) -> tuple[str, Any] | None:
    """(key, value) of the first :data:`BIAS_KEYS` a config (a mapping as written) states, or None."""
    return next(((key, cfg[key]) for key in BIAS_KEYS if cfg.get(key) is not None), None)


def config_qkv_bias(cfg: Any) -> bool:
    """What ``qkv_bias: auto`` reads from a transformers config: q/k/v biases when any of :data:`BIAS_KEYS` is true."""
    return any(bool(getattr(cfg, key, False)) for key in BIAS_KEYS)


def type_qkv_bias(model_type: str, target: Any = None) -> tuple[bool, str] | None:
    """What a config of ``model_type`` that states none of :data:`BIAS_KEYS` implies for q/k/v biases, and where
    that is read (data, never a branch on a family): ``target``, the registered target architecture of that
    model_type (its gqa params, checked against transformers' logits: Qwen2's attention always has q/k/v biases
    and its config class has no key saying so), else transformers' config class of that model_type (its own
    ``qkv_bias`` / ``attention_bias`` default). None when neither says (a model_type transformers does not know)."""
    recipe = getattr(target, "attention_recipe", None)
    if recipe is not None:
        name, params = recipe()
        if name == "gqa" and isinstance(params.get("qkv_bias"), bool):
            return params["qkv_bias"], f"draftsmith's {model_type} target, as transformers' {model_type} model"
    from transformers import CONFIG_MAPPING

    try:
        cls = CONFIG_MAPPING[model_type]
    except KeyError:
        return None
    for key in BIAS_KEYS:
        if isinstance(value := getattr(cls, key, None), bool):
            return value, f"transformers' {cls.__name__}.{key} default"
    return None


def gqa(params: GQAParams, *, dims: Dims, layer_idx: int, in_width: int, backend: Callable,
        norm: Callable[[int], nn.Module], **_) -> GQAttention:
    cfg = dims.config
    bias = params.qkv_bias
    if bias == "auto":
        bias = config_qkv_bias(cfg)
    o_bias = bool(getattr(cfg, "attention_bias", False)) if params.o_bias == "auto" else params.o_bias
    if layer_idx == 0:
        warn_stored_order("GQA", params.rope, cfg)   # the q/k rows' pair order, where the config says it
    rotated = cfg if params.rope_theta == "auto" else with_theta(cfg, params.rope_theta)
    return GQAttention(
        dims, in_width=in_width, layer_idx=layer_idx, rope=Rotary(rotated, dims.head_dim, params.rope),
        backend=backend, qkv_bias=bias, o_bias=o_bias,
        q_norm=norm(dims.head_dim) if params.qk_norm else None,
        k_norm=norm(dims.head_dim) if params.qk_norm else None,
    )
