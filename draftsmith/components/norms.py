"""RMSNorm, computed in float32 like the reference implementations."""
from __future__ import annotations

import torch
from torch import nn

from draftsmith.components.fused import add_rms_norm, kernel, rms_norm, rms_norm_cat


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.fused = False          # fused.fuse_model: one compiled kernel on CUDA

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel(rms_norm, self.fused)(x, self.weight, self.eps)

    def add_forward(self, x: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x + delta, self(x + delta)): a residual add and the norm after it, one kernel when fused."""
        return kernel(add_rms_norm, self.fused)(x, delta, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def rms(params, *, dim: int, eps: float) -> RMSNorm:
    """Factory of the ``norm: rms`` component."""
    return RMSNorm(dim, eps)


def add_then_norm(norm: nn.Module, x: torch.Tensor,
                  delta: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, norm(h)) with h = x + delta: through the norm's ``add_forward`` where it has one (one fused kernel),
    else the add and then the module (an identity slot, another norm). delta None: h = x (no add)."""
    if delta is None:
        return x, norm(x)
    add_forward = getattr(norm, "add_forward", None)
    if add_forward is not None:
        return add_forward(x, delta)
    h = x + delta
    return h, norm(h)


def norm_cat(norm_a: nn.Module, a: torch.Tensor, norm_b: nn.Module,
             b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(cat(norm_a(a), norm_b(b)), norm_b(b)): EAGLE-3's first attention input. One fused kernel when both are
    fused RMSNorms, else each slot (a norm, an identity) on its own and the concatenation."""
    if isinstance(norm_a, RMSNorm) and isinstance(norm_b, RMSNorm) and norm_a.fused and norm_b.fused:
        return kernel(rms_norm_cat, True)(a, norm_a.weight, norm_a.eps, b, norm_b.weight, norm_b.eps)
    nb = norm_b(b)
    return torch.cat((norm_a(a), nb), dim=-1), nb
