"""The ``attention: gqa`` component: its params and factory (the module itself is
:class:`draftsmith.components.attention.GQAttention`), and how ``qkv_bias: auto`` reads a config."""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Callable

from torch import nn

from draftsmith.components.attention import GQAttention
from draftsmith.components.backends import sinks_taken
from draftsmith.components.dims import Dims
from draftsmith.components.params import QK_NORM_KEY, GQAParams   # QK_NORM_KEY: what qk_norm: config reads
from draftsmith.components.rope import NoRotation, Rotary, layer_rope_type, rotates, warn_stored_order, with_theta
from draftsmith.components.softcap import softcapped
from draftsmith.errors import CheckpointError, OptionError, short
from draftsmith.values import is_number

BIAS_KEYS = ("qkv_bias", "attention_bias")   # what a config may state about q/k/v biases, the first one stated wins
QKV_BIAS = re.compile(r"(^|\.)self_attn\.[qkv]_proj\.bias$")   # the attention's q/k/v bias tensors, by canonical name


def stated_qkv_bias(cfg: Any) -> tuple[str, Any] | None:
    """(key, value) of the first :data:`BIAS_KEYS` a config (a mapping as written) states, or None."""
    return next(((key, cfg[key]) for key in BIAS_KEYS if cfg.get(key) is not None), None)


def config_qkv_bias(cfg: Any) -> bool:
    """What ``qkv_bias: auto`` reads from a transformers config: q/k/v biases when any of :data:`BIAS_KEYS` is true."""
    return any(bool(getattr(cfg, key, False)) for key in BIAS_KEYS)


def held_qkv_bias(names: Iterable[str]) -> bool | None:
    """Whether a checkpoint's tensors (canonical names) hold q/k/v biases; None where no names are known (a draft
    built without a checkpoint)."""
    names = list(names)
    return any(map(QKV_BIAS.search, names)) if names else None


def gqa(params: GQAParams, *, dims: Dims, layer_idx: int, in_width: int, backend: Callable,
        norm: Callable[[int], nn.Module], **_) -> GQAttention:
    cfg = dims.config
    bias = params.qkv_bias
    if bias == "auto":
        bias = config_qkv_bias(cfg)
    o_bias = bool(getattr(cfg, "attention_bias", False)) if params.o_bias == "auto" else params.o_bias
    if (cap := config_scale(cfg, params.softcap_key, "the tanh cap of its scores")) is not None:
        backend = softcapped(cap)   # no backend takes the cap: plain torch (components.softcap)
    if params.sinks and not sinks_taken(backend):
        raise OptionError(
            f"attention backend {getattr(backend, '__name__', backend)!r} (decoding.attention) does not compute "
            "attention sinks, which this model's attention has (self_attn.sinks: attention: gqa with sinks: true); "
            "without them its attention would not be the checkpoint's; allowed: a backend that takes sinks (auto, "
            "sdpa, eager, flex, flash). Fix: set decoding.attention to auto, or mark a plugin backend that "
            "computes them with components.backends.takes_sinks")
    if layer_idx == 0:
        warn_stored_order("GQA", params.rope, cfg)   # the q/k rows' pair order, where the config says it
    qk_norm = bool(getattr(cfg, QK_NORM_KEY, False)) if params.qk_norm == "config" else params.qk_norm
    rotated = cfg if params.rope_theta == "auto" else with_theta(cfg, params.rope_theta)
    layer_type = layer_rope_type(cfg, layer_idx) if params.layer_type_rope else None
    scaled = config_scale(cfg, params.scale_key, "its scores scaled by the value ** -0.5")
    rope = Rotary(rotated, dims.head_dim, params.rope, params.partial_rotary, layer_type) \
        if rotates(cfg, params.rope_layers_key, layer_idx) else NoRotation()   # a NoPE layer: q, k unrotated
    return GQAttention(
        dims, in_width=in_width, layer_idx=layer_idx, rope=rope,
        backend=backend, qkv_bias=bias, o_bias=o_bias,
        q_norm=norm(dims.head_dim) if qk_norm else None,
        k_norm=norm(dims.head_dim) if qk_norm else None, sinks=params.sinks,
        scale=None if scaled is None else scaled ** -0.5,
    )


def config_scale(cfg: Any, key: str | None, what: str) -> float | None:
    """The positive number the config's ``key`` (a spec's scale_key / softcap_key) holds, or None (no key named, or
    the config's absent or null); another value (0, a string, a bool) is a CheckpointError naming the config: a
    target's is refused before (target_options.options_check), a draft's only here."""
    if key is None or (value := getattr(cfg, key, None)) is None:
        return None
    if not (is_number(value) and value > 0):
        raise CheckpointError(getattr(cfg, "name_or_path", None) or "the model's config",
                              f"{key} is {short(value)}, which draftsmith cannot compute ({what}); allowed: a "
                              "positive number, or null")
    return float(value)
