"""Attention with its scores capped by tanh (Gemma-2's ``attn_logit_softcapping``): ``cap * tanh(scores / cap)``
before the mask and the softmax, as transformers' eager attention computes it (the one attention transformers runs
Gemma-2 with: its SDPA takes no cap). No fused kernel takes the cap, so such a layer computes its attention in plain
torch, whatever the backend chosen; a window wraps it as any backend (components.sliding)."""
from __future__ import annotations

import functools

import torch

from draftsmith.components.backends import causal_mask


@functools.cache   # one backend a cap: the layers' window wrappers share it, and so build each mask once
def softcapped(cap: float):
    """A backend (``fn(q, k, v, mask, scale)``, components.backends) whose scores are capped at +-``cap``: scores in
    q's dtype, scaled, capped, masked; softmax in float32, cast back before the values (transformers' eager)."""
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               scale: float) -> torch.Tensor:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.tanh((q @ k.transpose(-1, -2)) * scale / cap) * cap
        if mask is None:
            mask = causal_mask(q.shape[2], k.shape[2], q.device)
        scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(-1, dtype=torch.float32).to(q.dtype) @ v

    attend.cap = cap
    return attend


__all__ = ["softcapped"]
