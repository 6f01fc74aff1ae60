"""Gated feed-forward: down(act(gate(x)) * up(x)), act silu (SwiGLU: Llama / Mistral / Qwen) or gelu_tanh (GeGLU:
transformers' gelu_pytorch_tanh, Gemma's)."""
from __future__ import annotations

import torch
from torch import nn

from draftsmith.components.dims import Dims
from draftsmith.components.fused import gelu_tanh_mul, kernel, silu_mul
from draftsmith.components.params import MLPParams
from draftsmith.components.stacked import Stacked, stack


GATES = {"silu": silu_mul, "gelu_tanh": gelu_tanh_mul}   # MLPParams.activation -> act(gate) * up


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool = False, activation: str = "silu"):
        super().__init__()
        self.activation, self.gate = activation, GATES[activation]
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)
        self.fused = False          # fused.fuse_model: silu(gate) * up as one compiled kernel on CUDA
        self.gate_up: Stacked | None = None   # stacked.stack_model: gate | up as one product

    def stack_siblings(self) -> list[Stacked]:
        self.gate_up = stack([self.gate_proj, self.up_proj])
        return [self.gate_up] if self.gate_up else []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = self.gate_up(x) if self.gate_up else None
        gate, up = gate_up or (self.gate_proj(x), self.up_proj(x))
        return self.down_proj(kernel(self.gate, self.fused)(gate, up))


def swiglu(params: MLPParams, *, dims: Dims) -> SwiGLU:
    """Factory of the ``mlp: swiglu`` component."""
    config = getattr(dims, "config", None)   # auto: the config's mlp_bias (none: false)
    bias = bool(getattr(config, "mlp_bias", False)) if params.bias == "auto" else params.bias
    return SwiGLU(dims.hidden, dims.intermediate, bias=bias, activation=params.activation)
