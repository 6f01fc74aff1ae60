"""RMSNorm, computed in float32 like the reference implementations."""
from __future__ import annotations

import torch
from torch import nn

from draftsmith.components.fused import kernel, rms_norm


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.fused = False          # fused.fuse_model: one compiled kernel on CUDA

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel(rms_norm, self.fused)(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def rms(params, *, dim: int, eps: float) -> RMSNorm:
    """Factory of the ``norm: rms`` component."""
    return RMSNorm(dim, eps)
