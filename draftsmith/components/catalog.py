"""Every built-in component as a record; registered through the same hook as any plugin."""
from __future__ import annotations

from importlib import import_module
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict

from draftsmith.components import eagle3_config, params
from draftsmith.components.split_rule import SplitRule
from draftsmith.components.targets import TARGETS
from draftsmith.components.weights import RegexRule
from draftsmith.hooks import Component


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _same(params, **_):
    return params


def later(where: str) -> Callable[..., Any]:
    """The factory ``module:name`` of draftsmith.components, imported at its first call: the catalog names every
    built-in factory without importing torch, so a spec file's problems are said, and ``list`` prints, in a
    torch-free process; the modules load when a model is built."""
    module, name = where.split(":")

    def factory(*args, **kwargs):
        return getattr(import_module(f"draftsmith.components.{module}"), name)(*args, **kwargs)

    factory.__name__ = factory.__qualname__ = name
    return factory


def backend(name: str) -> Callable[..., Any]:
    """The factory of attention backend ``name`` (a function of :mod:`draftsmith.components.backends`), marked as
    one that every machine builds (:func:`builds_anywhere`)."""
    return _anywhere(lambda *_, **__: getattr(import_module("draftsmith.components.backends"), name))


def _anywhere(factory: Callable[..., Any]) -> Callable[..., Any]:
    factory.builds_anywhere = True
    return factory


def builds_anywhere(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` is a built-in backend's that no machine refuses (flash's is not, nor a plugin's): a
    spec's ``validate`` asks this machine (and imports torch) only about the others."""
    return getattr(factory, "builds_anywhere", False) is True


def _flash(*_, **__):
    from draftsmith.components import backends

    if not backends.has_flash_attn():
        from draftsmith.errors import OptionError   # this machine's lack, not a bug: one message, exit 2

        raise OptionError("attention backend 'flash' needs flash-attn: pip install 'draftsmith[flash]' on a CUDA "
                           "machine, or use 'auto' / 'sdpa'")
    return backends.flash


def builtin_components() -> list[Component]:
    return [
        Component("layer", "llama", later("layers:llama_layer"), params.LayerParams,
                  doc="pre-norm residual block (identity slots)"),
        Component("attention", "gqa", later("gqa:gqa"), params.GQAParams, doc="grouped-query attention, paged KV",
                  holds=params.gqa_holds, reads=params.gqa_reads),
        Component("attention", "mla", later("mla:mla"), params.MLAParams,
                  doc="DeepSeek-V3 latent attention; pool keeps latent + rope", holds=params.mla_holds),
        Component("mlp", "swiglu", later("mlp:swiglu"), params.MLPParams, doc="down(silu(gate(x)) * up(x))"),
        Component("moe", "sparse", later("moe:moe"), params.MoEParams,
                  doc="a target's mixture of experts: routed (and shared) swiglu experts"),
        Component("moe", "stacked", later("stacked_moe:stacked_moe"), params.StackedMoEParams,
                  doc="a target's mixture of experts held as stacked tensors with biases (top-k, then softmax)"),
        Component("norm", "rms", later("norms:rms"), params.RMSParams, doc="RMSNorm in float32"),
        Component("fusion", "eagle1", later("fusion:eagle1"), params.Eagle1Params, doc="fc over [embed; hidden]",
                  holds=params.eagle1_holds),
        Component("fusion", "eagle3", later("fusion:eagle3"), params.Eagle3Params, doc="fc over k aux states",
                  holds=params.eagle3_holds, reads=eagle3_config.read_flags),
        Component("fusion", "mtp", later("mtp:mtp"), params.MTPParams,
                  doc="DeepSeek-V3 MTP: eh_proj over [enorm(embed); hnorm(hidden)]", holds=params.mtp_holds),
        Component("weight_rule", "regex", _same, RegexRule, doc="rename checkpoint names by regex"),
        Component("weight_rule", "split", _same, SplitRule,
                  doc="split one checkpoint tensor's rows into canonical parts (fused qkv_proj, gate_up_proj)"),
        Component("quant", "none", _same, Strict, doc="no quantization (draft only; never the target's)"),
        Component("quant", "fp8", later("quant_models:fp8"), params.FP8Params,
                  doc="FP8 e4m3 weights: per-tensor, per-channel or 128x128 block scales (draft only)"),
        Component("attn_backend", "sdpa", backend("sdpa"),
                  doc="torch SDPA: masks, or mask-free causal (its flash kernel)"),
        Component("attn_backend", "eager", backend("eager"), doc="plain torch reference"),
        Component("attn_backend", "flex", backend("flex"), doc="FlexAttention block masks (trees)"),
        Component("attn_backend", "flash", _flash, doc="flash-attn for causal calls on CUDA, flex otherwise"),
        Component("attn_backend", "auto", backend("auto"),
                  doc="measured default: flash-attn (CUDA, if installed) for causal calls, else sdpa"),
        *(Component("target", name, make, doc=f"Hugging Face model_type {name}") for name, make in TARGETS.items()),
    ]
