"""Attention backends: ``fn(q [B,H,T,d], k [B,Hkv,S,d], v, mask [B,1,T,S] bool | None, scale) -> [B,H,T,d]``.

``mask=None`` means causal, the T queries being the last T of the S keys (bottom-right aligned). Backends are
registered components (kind ``attn_backend``), so the choice is a spec field (``decoding.attention``), never an
if in a model.
"""
from __future__ import annotations

import functools
import importlib.util
import warnings
import weakref

import torch
from torch.nn import functional as F


def causal_mask(T: int, S: int, device=None) -> torch.Tensor:
    """[T, S] bool: query t sees keys 0..S-T+t (the queries are the last T positions)."""
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(S - T)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    T, S = q.shape[2], k.shape[2]
    if mask is None and T != S:  # SDPA's is_causal is top-left aligned; ours is bottom-right
        mask = causal_mask(T, S, q.device)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=mask is None, scale=scale, enable_gqa=k.shape[1] != q.shape[1]
    )


def eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """Reference maths in plain torch (softmax in at least float32); the oracle the other backends are tested
    against."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-1, -2)).to(torch.promote_types(q.dtype, torch.float32)) * scale
    if mask is None:
        mask = causal_mask(q.shape[2], k.shape[2], q.device)
    scores = scores.masked_fill(~mask, float("-inf"))
    return (scores.softmax(-1).to(v.dtype)) @ v


def flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """FlexAttention with a block mask built from the boolean mask (trees: the block mask skips whole empty
    tiles). The block mask is built once per forward and reused by every layer (same mask object)."""
    from torch.nn.attention.flex_attention import flex_attention

    B, _, T, _ = q.shape
    S = k.shape[2]
    block = _block_mask(mask, B, T, S, q.device)
    fn = _compiled_flex() if q.is_cuda else flex_attention
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the CPU path is the unfused reference; that is fine here
        return fn(q, k, v, block_mask=block, scale=scale, enable_gqa=k.shape[1] != q.shape[1])


_BLOCKS: dict[int, tuple[weakref.ref, object]] = {}  # id(mask) -> (ref to the mask, its block mask)


def _block_mask(mask: torch.Tensor | None, B: int, T: int, S: int, device):
    # every layer of one forward gets the same mask object, so its block mask is built once
    if mask is None:
        return _causal_block(B, T, S, str(device))
    hit = _BLOCKS.get(id(mask))
    if hit is None or hit[0]() is not mask:
        from torch.nn.attention.flex_attention import create_block_mask

        m = mask[:, 0]
        block = create_block_mask(lambda b, h, qi, ki: m[b, qi, ki], B, None, T, S, device=device)
        key = id(mask)
        hit = _BLOCKS[key] = (weakref.ref(mask, lambda _: _BLOCKS.pop(key, None)), block)
    return hit[1]


@functools.lru_cache(maxsize=16)
def _causal_block(B: int, T: int, S: int, device: str):
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(lambda b, h, qi, ki: ki <= qi + (S - T), B, None, T, S, device=device)


@functools.cache
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=True)


def flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """flash-attn for plain causal attention (mask=None) on CUDA; masked calls (trees, batches with padding) go
    to FlexAttention. flash-attn is optional: without it this backend is refused when chosen."""
    if mask is not None or not q.is_cuda:
        return flex(q, k, v, mask, scale)
    from flash_attn import flash_attn_func

    out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale, causal=True)
    return out.transpose(1, 2)


def has_flash_attn() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


def auto(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """The default policy: SDPA on CPU; on CUDA, FlexAttention for masked (tree / padded) calls and flash-attn
    (when installed) or SDPA for plain causal ones."""
    if not q.is_cuda:
        return sdpa(q, k, v, mask, scale)
    if mask is not None:
        return flex(q, k, v, mask, scale)
    return flash(q, k, v, mask, scale) if has_flash_attn() else sdpa(q, k, v, mask, scale)
