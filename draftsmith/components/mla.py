"""Multi-head latent attention (DeepSeek-V2/V3 MLA) over the paged KV pool, and its factory.

Per token the pool stores the compressed latent (after ``kv_a_layernorm``, width ``kv_lora_rank``) and the
rotated shared key part (width ``qk_rope_head_dim``): ``cache_layout() == {"latent": (r,), "rope": (dr,)}``.
Keys and values are expanded from the latent by ``kv_b_proj`` at read time, so compaction (invariant 14) moves
exactly those two tensors. Canonical tensor names are DeepSeek-V3's (``q_a_proj``, ``q_a_layernorm``,
``q_b_proj`` or ``q_proj`` when ``q_lora_rank`` is null, ``kv_a_proj_with_mqa``, ``kv_a_layernorm``,
``kv_b_proj``, ``o_proj``); other layouts (Mistral's ``attention.wq_a`` ...) are translated by spec rules.

Sizes come from the config's MLA fields; ``kv_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim`` and
``v_head_dim`` are required (an MLA config without them is refused by name), ``q_lora_rank`` may be null.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from functools import partial
from typing import Callable

import torch
from torch import nn

from draftsmith.components.dims import Dims
from draftsmith.components.params import MLAParams
from draftsmith.components.rope import Rotary, warn_stored_order
from draftsmith.errors import CheckpointError

MLA_NEEDS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


@dataclass(frozen=True)
class MLADims:
    heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope: int
    qk_rope: int
    v_head: int

    @property
    def qk_head(self) -> int:
        return self.qk_nope + self.qk_rope

    @classmethod
    def from_config(cls, cfg, heads: int) -> "MLADims":
        """The MLA sizes of ``cfg``; a CheckpointError naming the config's file (its ``name_or_path``) and the keys
        it lacks, e.g. a GQA draft's config under a spec that says ``attention: {kind: mla}``."""
        missing = [k for k in MLA_NEEDS if getattr(cfg, k, None) is None]
        if missing:
            source = getattr(cfg, "name_or_path", None) or "the model's config"
            raise CheckpointError(source, f"attention mla needs {', '.join(MLA_NEEDS)} (q_lora_rank may be null); "
                                          f"missing or null: {', '.join(missing)}. A config without them is a GQA "
                                          "model's: set the spec's draft.attention.kind to gqa (or auto)")
        q = getattr(cfg, "q_lora_rank", None)
        return cls(heads, int(q) if q else None, int(cfg.kv_lora_rank), int(cfg.qk_nope_head_dim),
                   int(cfg.qk_rope_head_dim), int(cfg.v_head_dim))


def softmax_scale(cfg, qk_head: int) -> float:
    """qk_head ** -0.5, times mscale(factor, mscale_all_dim) ** 2 for scaled (yarn) rope: DeepSeek-V3's rule."""
    scale = qk_head**-0.5
    rope = dict(getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {})
    kind = rope.get("rope_type", rope.get("type", "default"))
    mscale_all_dim = rope.get("mscale_all_dim", 0)
    factor = float(rope.get("factor", 1.0))
    if kind != "default" and mscale_all_dim and factor > 1:
        m = 0.1 * mscale_all_dim * math.log(factor) + 1.0
        scale *= m * m
    return scale


class MLAttention(nn.Module):
    def __init__(self, dims: Dims, mla: MLADims, *, in_width: int, layer_idx: int, rope: nn.Module, backend: Callable,
                 norm: Callable[[int], nn.Module], bias: bool = False, scale: float | None = None):
        super().__init__()
        self.mla, self.layer_idx, self.backend, self.rope = mla, layer_idx, backend, rope
        H = mla.heads
        if mla.q_lora_rank:
            self.q_a_proj = nn.Linear(in_width, mla.q_lora_rank, bias=bias)
            self.q_a_layernorm = norm(mla.q_lora_rank)
            self.q_b_proj = nn.Linear(mla.q_lora_rank, H * mla.qk_head, bias=False)
        else:
            self.q_proj = nn.Linear(in_width, H * mla.qk_head, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(in_width, mla.kv_lora_rank + mla.qk_rope, bias=bias)
        self.kv_a_layernorm = norm(mla.kv_lora_rank)
        self.kv_b_proj = nn.Linear(mla.kv_lora_rank, H * (mla.qk_nope + mla.v_head), bias=False)
        self.o_proj = nn.Linear(H * mla.v_head, dims.hidden, bias=bias)
        self.scale = scale if scale is not None else mla.qk_head**-0.5

    def cache_layout(self) -> dict[str, tuple[int, ...]]:
        """Per-token shapes this layer stores in the KV pool: the normed latent and the rotated shared key."""
        return {"latent": (self.mla.kv_lora_rank,), "rope": (self.mla.qk_rope,)}

    def _queries(self, x: torch.Tensor) -> torch.Tensor:
        if self.mla.q_lora_rank:
            return self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        return self.q_proj(x)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, kv=None) -> torch.Tensor:
        # x: [B, T, in_width]; pos: [B, T] absolute positions
        m, (B, T, _) = self.mla, x.shape
        q = self._queries(x).view(B, T, m.heads, m.qk_head)
        q_nope, q_rot = q.split([m.qk_nope, m.qk_rope], dim=-1)
        latent, k_rot = self.kv_a_proj_with_mqa(x).split([m.kv_lora_rank, m.qk_rope], dim=-1)
        latent = self.kv_a_layernorm(latent)                                  # [B, T, r]
        memo = kv.memo if kv is not None else None
        q_rot, k_rot = self.rope(q_rot, k_rot[:, :, None], pos, memo)         # [B, T, H, dr], [B, T, 1, dr]
        k_rot, mask = k_rot[:, :, 0], None
        if kv is not None:
            got, mask = kv.exchange(self.layer_idx, latent=latent, rope=k_rot)  # {latent: [B, S, r], rope: [B, S, dr]}
            latent, k_rot = got["latent"], got["rope"]
        S = latent.shape[1]
        k_nope, v = self.kv_b_proj(latent).view(B, S, m.heads, m.qk_nope + m.v_head).split([m.qk_nope, m.v_head], -1)
        k = torch.cat((k_nope, k_rot[:, :, None].expand(B, S, m.heads, m.qk_rope)), dim=-1)  # [B, S, H, dqk]
        q = torch.cat((q_nope, q_rot), dim=-1)                                # [B, T, H, dqk]
        out = self.backend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask, self.scale)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, m.heads * m.v_head))


def rope_config(cfg, rope_dim: int):
    """The config the rotary frequencies are computed from: rope covers only qk_rope_head_dim (transformers'
    DeepseekV3Config sets head_dim to it; a Llama-built draft config would say hidden/heads)."""
    if getattr(cfg, "head_dim", None) == rope_dim:
        return cfg
    out = copy.copy(cfg)
    out.head_dim = rope_dim
    return out


def mla(params: MLAParams, *, dims: Dims, layer_idx: int, in_width: int, backend: Callable,
        norm: Callable[[int], nn.Module], **_) -> MLAttention:
    cfg = dims.config
    m = MLADims.from_config(cfg, dims.heads)
    style = params.rope
    if style == "auto":
        style = "interleaved" if getattr(cfg, "rope_interleave", True) else "neox"
    elif layer_idx == 0:
        warn_stored_order("MLA", style, cfg)
    rope = Rotary(rope_config(cfg, m.qk_rope), m.qk_rope, style)
    eps = params.latent_norm_eps
    latent_norm = norm if eps == "config" else partial(norm, eps=eps)
    return MLAttention(dims, m, in_width=in_width, layer_idx=layer_idx, rope=rope, backend=backend, norm=latent_norm,
                       bias=bool(getattr(cfg, "attention_bias", False)), scale=softmax_scale(cfg, m.qk_head))
