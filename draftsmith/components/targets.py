"""Target architectures, one record per Hugging Face ``model_type``: what differs between Llama-family targets is
data here (q/k/v bias, per-head q/k norms), never an if on a family name in the model code."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class TargetArch(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    qkv_bias: bool | None = None       # None: the config's `attention_bias`
    qk_norm: bool = False              # RMSNorm over each head of q and k (Qwen3)
    recurrent: bool = False            # has mamba / linear-attention layers (rules out spec v2)


def arch(**fixed):
    return lambda params=None, **_: TargetArch(**fixed)


TARGETS = {
    "llama": arch(),
    "mistral": arch(),
    "qwen2": arch(qkv_bias=True),
    "qwen3": arch(qk_norm=True),
}
