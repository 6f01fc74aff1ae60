"""Rotary position embeddings.

Frequencies come from the model's own transformers config (``rope_parameters``: default, linear, llama3, yarn,
dynamic, longrope — transformers' ``ROPE_INIT_FUNCTIONS`` compute them, so every scaling a Hugging Face config
can name is read the way transformers reads it). What draftsmith owns is how the rotation is applied: ``neox``
rotates the two halves of each head, ``interleaved`` rotates adjacent pairs (Mistral-native / GPT-J order).

Limit: the frequencies are fixed at load time. transformers recomputes ``dynamic`` (NTK) frequencies once a
sequence passes ``max_position_embeddings`` and switches ``longrope`` factors past
``original_max_position_embeddings``; beyond those lengths such targets are not at parity with transformers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch
from torch import nn

from draftsmith.components import fused
from draftsmith.components.fused import kernel

if TYPE_CHECKING:
    from transformers import PretrainedConfig

Style = Literal["neox", "interleaved"]


def inv_freq_for(config: PretrainedConfig, head_dim: int) -> tuple[torch.Tensor, float]:
    """(inv_freq [head_dim // 2] float32, attention scaling) for a transformers config."""
    params = dict(getattr(config, "rope_parameters", None) or {})
    kind = params.get("rope_type", "default")
    theta = float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
    if kind == "default":
        exps = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim
        return 1.0 / (theta**exps), 1.0
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if kind not in ROPE_INIT_FUNCTIONS:
        known = ", ".join(["default", *ROPE_INIT_FUNCTIONS])
        raise ValueError(f"rope_type {kind!r} is not known to transformers; known: {known}")
    inv, scale = ROPE_INIT_FUNCTIONS[kind](config, torch.device("cpu"))
    return inv.to(torch.float32), float(scale)


class Rotary(nn.Module):
    """Applies rotary embeddings to q and k of shape [B, T, heads, head_dim] at positions [B, T]."""

    def __init__(self, config: PretrainedConfig, head_dim: int, style: Style = "neox"):
        super().__init__()
        self.config, self.head_dim, self.style = config, head_dim, style
        self.register_buffer("inv_freq", torch.empty(head_dim // 2), persistent=False)
        self.scale = 1.0
        self.fused = False          # fused.fuse_model: one compiled kernel on CUDA
        self.reset_buffers()

    def reset_buffers(self, device: torch.device | str | None = None) -> None:
        """(Re)compute frequencies; the assembler calls this after building on the meta device."""
        with torch.device("cpu"):  # real numbers even while the model is being built on meta
            inv, self.scale = inv_freq_for(self.config, self.head_dim)
        self.inv_freq = inv if device is None else inv.to(device)

    def forward(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return kernel(fused.rope, self.fused)(q, k, pos, *self._angles(pos))

    def with_values(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(rotated q, [B, T, 2, Hk, d] rotated k beside v): the rotation and the cache row in one kernel when
        fused."""
        return kernel(fused.rope_kv, self.fused)(q, k, v, pos, *self._angles(pos))

    def _angles(self, pos: torch.Tensor) -> tuple[torch.Tensor, float, bool]:
        # what the rotation functions take after the tensors: frequencies on pos's device, scale, pair layout
        return self.inv_freq.to(pos.device), self.scale, self.style == "interleaved"
