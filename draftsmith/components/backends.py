"""Attention backends: ``fn(q [B,H,T,d], k [B,Hkv,S,d], v, mask [B,1,T,S] bool | None, scale) -> [B,H,T,d]``.

``mask=None`` means causal over T == S. Backends are registered components (kind ``attn_backend``), so the
choice is a spec field (``decoding.attention``), never an if in a model.
"""
from __future__ import annotations

import torch
from torch.nn import functional as F


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=mask is None, scale=scale, enable_gqa=k.shape[1] != q.shape[1]
    )


def eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """Reference maths in plain torch (softmax in float32); the oracle the other backends are tested against."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-1, -2)).float() * scale
    if mask is None:
        T, S = q.shape[2], k.shape[2]
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)
    scores = scores.masked_fill(~mask, float("-inf"))
    return (scores.softmax(-1).to(v.dtype)) @ v
