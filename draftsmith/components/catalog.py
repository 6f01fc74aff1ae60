"""Every built-in component as a record; registered through the same hook as any plugin."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from draftsmith.components import backends, eagle3_config, fusion, mla, mtp, quant, quant_models
from draftsmith.components.gqa import GQAParams, gqa, gqa_holds
from draftsmith.components.layers import llama_layer
from draftsmith.components.mlp import MLPParams, swiglu
from draftsmith.components.norms import rms
from draftsmith.components.split_rule import SplitRule
from draftsmith.components.targets import TARGETS
from draftsmith.components.weights import RegexRule
from draftsmith.hooks import Component


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _same(params, **_):
    return params


def _flash(*_, **__):
    if not backends.has_flash_attn():
        from draftsmith.errors import OptionError   # this machine's lack, not a bug: one message, exit 2

        raise OptionError("attention backend 'flash' needs flash-attn: pip install 'draftsmith[flash]' on a CUDA "
                           "machine, or use 'auto' / 'sdpa'")
    return backends.flash


def builtin_components() -> list[Component]:
    return [
        Component("layer", "llama", llama_layer, doc="pre-norm residual block (identity slots)"),
        Component("attention", "gqa", gqa, GQAParams, doc="grouped-query attention, paged KV", holds=gqa_holds),
        Component("attention", "mla", mla.mla, mla.MLAParams,
                  doc="DeepSeek-V3 latent attention; pool keeps latent + rope", holds=mla.mla_holds),
        Component("mlp", "swiglu", swiglu, MLPParams, doc="down(silu(gate(x)) * up(x))"),
        Component("norm", "rms", rms, doc="RMSNorm in float32"),
        Component("fusion", "eagle1", fusion.eagle1, fusion.Eagle1Params, doc="fc over [embed; hidden]",
                  holds=fusion.eagle1_holds),
        Component("fusion", "eagle3", fusion.eagle3, fusion.Eagle3Params, doc="fc over k aux states",
                  holds=fusion.eagle3_holds, reads=eagle3_config.read_flags),
        Component("fusion", "mtp", mtp.mtp, mtp.MTPParams,
                  doc="DeepSeek-V3 MTP: eh_proj over [enorm(embed); hnorm(hidden)]", holds=mtp.mtp_holds),
        Component("weight_rule", "regex", _same, RegexRule, doc="rename checkpoint names by regex"),
        Component("weight_rule", "split", _same, SplitRule,
                  doc="split one checkpoint tensor's rows into canonical parts (fused qkv_proj, gate_up_proj)"),
        Component("quant", "none", _same, Strict, doc="no quantization (draft only; never the target's)"),
        Component("quant", "fp8", quant_models.fp8, quant.FP8Params,
                  doc="FP8 e4m3 weights: per-tensor, per-channel or 128x128 block scales (draft only)"),
        Component("attn_backend", "sdpa", lambda *_, **__: backends.sdpa,
                  doc="torch SDPA: masks, or mask-free causal (its flash kernel)"),
        Component("attn_backend", "eager", lambda *_, **__: backends.eager, doc="plain torch reference"),
        Component("attn_backend", "flex", lambda *_, **__: backends.flex, doc="FlexAttention block masks (trees)"),
        Component("attn_backend", "flash", _flash, doc="flash-attn for causal calls on CUDA, flex otherwise"),
        Component("attn_backend", "auto", lambda *_, **__: backends.auto,
                  doc="measured default: flash-attn (CUDA, if installed) for causal calls, else sdpa"),
        *(Component("target", name, make, doc=f"Hugging Face model_type {name}") for name, make in TARGETS.items()),
    ]
