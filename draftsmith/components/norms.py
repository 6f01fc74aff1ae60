"""RMSNorm, computed in float32 like the reference implementations; ``offset`` (Gemma's zero-centred weights,
stored as offsets from 1) scales by ``offset + weight`` in float32 before the cast back, as transformers' Gemma;
``float32_weight`` scales by the weight in float32 before the cast back too (gpt-oss's: Llama's casts first)."""
from __future__ import annotations

import torch
from torch import nn

from draftsmith.components.fused import add_rms_norm, kernel, rms_norm, rms_norm_cat


def offset_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float) -> torch.Tensor:
    # x: [..., D] -> [..., D]: normalised in float32 and scaled by (offset + weight) in float32, then cast back
    # (transformers' Gemma RMSNorm: (x * (1 + w)).to(dtype), where Llama's casts before the weight)
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (h * (offset + weight.to(torch.float32))).to(x.dtype)


def add_offset_rms_norm(x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float, offset: float):
    # a residual add and the offset RMSNorm after it: (x + delta, offset_rms_norm(x + delta))
    h = x + delta
    return h, offset_rms_norm(h, weight, eps, offset)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6, offset: float = 0.0, float32_weight: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps, self.offset = eps, offset   # offset: the weight is stored as an offset from it (Gemma's 1.0)
        self.upcast = bool(offset) or float32_weight   # the weight applied in float32, before the cast back
        self.fused = False          # fused.fuse_model: one compiled kernel on CUDA

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.upcast:
            return kernel(offset_rms_norm, self.fused)(x, self.weight, self.eps, self.offset)
        return kernel(rms_norm, self.fused)(x, self.weight, self.eps)

    def add_forward(self, x: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x + delta, self(x + delta)): a residual add and the norm after it, one kernel when fused."""
        if self.upcast:
            return kernel(add_offset_rms_norm, self.fused)(x, delta, self.weight, self.eps, self.offset)
        return kernel(add_rms_norm, self.fused)(x, delta, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}" + (f", offset={self.offset}" if self.offset else "") + (
            ", float32_weight" if self.upcast and not self.offset else "")


def rms(params, *, dim: int, eps: float) -> RMSNorm:
    """Factory of the ``norm: rms`` component (``offset``, ``float32_weight``: its params', 0 / false where it has
    none)."""
    return RMSNorm(dim, eps, getattr(params, "offset", 0.0), getattr(params, "float32_weight", False))


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
    if (isinstance(norm_a, RMSNorm) and isinstance(norm_b, RMSNorm) and norm_a.fused and norm_b.fused
            and not norm_a.upcast and not norm_b.upcast):
        return kernel(rms_norm_cat, True)(a, norm_a.weight, norm_a.eps, b, norm_b.weight, norm_b.eps)
    nb = norm_b(b)
    return torch.cat((norm_a(a), nb), dim=-1), nb
