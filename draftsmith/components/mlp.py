"""SwiGLU feed-forward (Llama / Mistral / Qwen): down(silu(gate(x)) * up(x))."""
from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict
from torch import nn
from draftsmith.components.dims import Dims
from draftsmith.components.fused import kernel, silu_mul


class MLPParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    bias: bool = False


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool = False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)
        self.fused = False          # fused.fuse_model: silu(gate) * up as one compiled kernel on CUDA

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(kernel(silu_mul, self.fused)(self.gate_proj(x), self.up_proj(x)))


def swiglu(params: MLPParams, *, dims: Dims) -> SwiGLU:
    """Factory of the ``mlp: swiglu`` component."""
    return SwiGLU(dims.hidden, dims.intermediate, bias=params.bias)
