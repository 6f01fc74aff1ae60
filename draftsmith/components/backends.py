"""Attention backends: ``fn(q [B,H,T,d], k [B,Hkv,S,d], v, mask [B,1,T,S] bool | None, scale) -> [B,H,T,d]``.

``mask=None`` means causal, the T queries being the last T of the S keys (bottom-right aligned). Backends are
registered components (kind ``attn_backend``), so the choice is a spec field (``decoding.attention``), never an
if in a model.

Attention sinks (``attention: gqa`` with ``sinks: true``): a backend marked :func:`takes_sinks` also takes
``sinks=`` [H], one learned logit per head that joins each query's softmax over its keys and carries no value (it
is dropped after the softmax: transformers' ``eager_attention_forward`` with ``module.sinks``). Every built-in
backend takes them: eager adds the column to its scores; sdpa attends one more key, first, whose score is the sink
(q gains a column holding sink / scale, where that key has 1 and every other key 0) and whose value is zeros, so
nothing grows with heads x T x S: a causal call (a long prefill) stays mask-free, reaching SDPA's fused kernels,
and a masked one's boolean mask gains a column; flex rescales its output by sigmoid(lse - sink), from the
log-sum-exp it returns; flash-attn takes no sinks, so ``flash`` sends such calls to flex and ``auto`` to sdpa. A
plugin backend without the mark is refused for a layer with sinks (:func:`draftsmith.components.gqa.gqa`), rather
than silently computing attention without them.
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


def takes_sinks(fn):
    """Mark ``fn`` as a backend that takes ``sinks=`` (see the module's docstring); returns it."""
    fn.takes_sinks = True
    return fn


def sinks_taken(backend) -> bool:
    """Whether an attention backend (a registered one, or a wrapper of one) computes attention sinks."""
    return getattr(backend, "takes_sinks", False) is True


@takes_sinks
def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
         sinks: torch.Tensor | None = None) -> torch.Tensor:
    """PyTorch SDPA. Causal calls stay mask-free, so on CUDA they reach its fused (flash) kernels: T == S is
    SDPA's own is_causal, one query sees every key, and otherwise a lower-right CausalBias (SDPA's is_causal is
    top-left aligned; ours is bottom-right)."""
    T, S = q.shape[2], k.shape[2]
    if T == 1 and q.device.type == "cpu" and q.dtype in (torch.bfloat16, torch.float16):
        # torch's CPU kernel runs one low-precision query 3-4x slower than in float32 (0.76 vs 0.18 ms at 9 heads
        # x 576 keys, 12 vs 4 ms at 16 rows): a decode step upcasts, at no loss of accuracy
        return sdpa(q.float(), k.float(), v.float(), mask, scale, sinks).to(q.dtype)
    if sinks is not None:
        return _sdpa_sinks(q, k, v, mask, scale, sinks)
    is_causal = mask is None and T == S > 1
    if mask is None and 1 < T < S:
        # imported here: torch.nn.attention.bias imports torch._dynamo, ~2 s of every command's start (a spec
        # error's too) at module level; a later import is a lookup (dynamo traces it too)
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(T, S)
    elif mask is not None and q.is_cuda:
        # SDPA turns a boolean mask into an additive one on every call (kernels of their own, per layer, on
        # CUDA); every layer of a forward gets the same mask object, so it is turned once per forward
        mask = per_mask(mask, q.dtype, additive)
    # masked GQA calls run SDPA's math kernel on CUDA (its memory-efficient kernel takes no enable_gqa); expanding
    # the kv heads to reach it measured 1.2-1.9x slower at verification shapes (benchmarks/bench_attention.py)
    gqa = k.shape[1] != q.shape[1]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=gqa)


def _sdpa_sinks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
                sinks: torch.Tensor) -> torch.Tensor:
    # the sink is one more key, first, whose score is each head's sink and whose value is zeros: q gains a column
    # holding sink / scale, every key a 0 there but the sink key's 1 (its other columns 0); nothing grows with
    # heads x T x S, and causal calls stay mask-free (a dummy first query, which sees the sink key alone, keeps
    # T == S SDPA's is_causal; it is dropped, with the padded column, from the output)
    # in bf16 / fp16 sink / scale is exact where scale is a power of 2 (gpt-oss's 64-wide heads: 1/8)
    B, H, T, d = q.shape
    column = (sinks.to(torch.promote_types(q.dtype, torch.float32)) / scale).to(q.dtype)
    q = torch.cat((q, column.view(1, H, 1, 1).expand(B, H, T, 1)), dim=-1)
    k = F.pad(k, (0, 1, 1, 0))
    k[:, :, 0, d] = 1
    v = F.pad(v, (0, 1, 1, 0))   # q, k and v of one head size: SDPA's fused kernels take no other
    if mask is not None:
        mask = per_mask(mask, "sink key", _with_sink_key)   # made once per forward (every layer's mask object)
    elif T > 1:
        q = F.pad(q, (0, 0, 1, 0))
    return sdpa(q, k, v, mask, scale)[..., -T:, :d]


def _with_sink_key(mask: torch.Tensor, _) -> torch.Tensor:
    """[.., T, S] bool -> [.., T, S + 1]: every query sees the sink key, first."""
    return F.pad(mask, (1, 0), value=True)


@takes_sinks
def eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
          sinks: torch.Tensor | None = None) -> torch.Tensor:
    """Reference maths in plain torch (softmax in at least float32); the oracle the other backends are tested
    against. ``sinks``: a column per head joins the softmax and is dropped (transformers' gpt-oss eager)."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-1, -2)).to(torch.promote_types(q.dtype, torch.float32)) * scale
    if mask is None:
        mask = causal_mask(q.shape[2], k.shape[2], q.device)
    scores = scores.masked_fill(~mask, float("-inf"))
    if sinks is not None:
        column = sinks.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
        return torch.cat((scores, column), dim=-1).softmax(-1)[..., :-1].to(v.dtype) @ v
    return (scores.softmax(-1).to(v.dtype)) @ v


@takes_sinks
def flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
         sinks: torch.Tensor | None = None) -> torch.Tensor:
    """FlexAttention with a block mask built from the boolean mask (trees: the block mask skips whole empty
    tiles). The block mask is built once per forward and reused by every layer (same mask object). ``sinks``: the
    output times sigmoid(lse - sink), the share of each query's softmax its keys keep beside the sink."""
    B, _, T, _ = q.shape
    S = k.shape[2]
    block = _block_mask(mask, B, T, S, q.device)
    fn = flex_kernel(q.is_cuda)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the CPU path is the unfused reference; that is fine here
        got = fn(q, k, v, block_mask=block, scale=scale, enable_gqa=k.shape[1] != q.shape[1],
                 return_lse=sinks is not None, **_flex_options(q))
    if sinks is None:
        return got
    out, lse = got   # lse [B, H, T], float32 (natural log)
    return out * torch.sigmoid(lse - sinks.float().view(1, -1, 1)).unsqueeze(-1).to(out.dtype)


_DERIVED: dict[tuple, tuple[weakref.ref, object]] = {}  # (id(mask), key) -> (ref to the mask, what was made)


def per_mask(mask: torch.Tensor, key, build):
    """``build(mask, key)``, made once per mask object and key: every layer of one forward gets the same mask
    object, so what a backend derives from it (a block mask, an additive mask) is made once per forward."""
    k = (id(mask), key)
    hit = _DERIVED.get(k)
    if hit is None or hit[0]() is not mask:
        hit = _DERIVED[k] = (weakref.ref(mask, lambda _: _DERIVED.pop(k, None)), build(mask, key))
    return hit[1]


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[..] bool -> [..] ``dtype``: 0 where True, -inf where False (what SDPA makes of a boolean mask)."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def _block_mask(mask: torch.Tensor | None, B: int, T: int, S: int, device):
    if mask is None:
        return _causal_block(B, T, S, str(device))
    # a mask may be shared by the batch ([1, 1, T, S], e.g. a sliding window's prefill mask): the block mask's
    # mask_mod indexes it per row, so it is made at the batch's size
    return per_mask(mask, ("block", B), lambda m, key: block_mask_from_bool(m.expand(key[1], -1, -1, -1)))


def block_mask_from_bool(mask: torch.Tensor, block: int = 128):
    """[B, 1, T, S] bool -> FlexAttention BlockMask by tile reductions, not by evaluating a mask function over
    every (q, k) pair: a tile that is all True is full (no mask lookups), one with some True is partial (the
    kernel reads the mask there), the rest are skipped. A tree's committed prefix is full tiles."""
    from torch.nn.attention.flex_attention import BlockMask

    B, _, T, S = mask.shape
    nq, nk = -(-T // block), -(-S // block)
    padded = F.pad(mask[:, 0], (0, nk * block - S, 0, nq * block - T))  # [B, Tp, Sp], False outside
    tiles = padded.view(B, nq, block, nk, block)
    some, every = tiles.any(4).any(2), tiles.all(4).all(2)             # [B, nq, nk]

    def listed(sel):  # [B, nq, nk] -> count [B, 1, nq], kv tile ids [B, 1, nq, nk] (the selected ones first)
        order = torch.argsort((~sel).to(torch.int8), dim=-1, stable=True)
        return sel.sum(-1, dtype=torch.int32)[:, None], order.to(torch.int32)[:, None]

    def mask_mod(b, h, qi, ki):
        return padded[b, qi, ki]

    return BlockMask.from_kv_blocks(*listed(some & ~every), *listed(every), BLOCK_SIZE=block, mask_mod=mask_mod,
                                    seq_lengths=(T, S))


@functools.lru_cache(maxsize=16)   # never inside a captured step: on CUDA a step's forwards always carry a mask
def _causal_block(B: int, T: int, S: int, device: str):
    return block_mask_from_bool(causal_mask(T, S, device).expand(B, 1, T, S))


def _flex_options(q: torch.Tensor) -> dict:
    # on CUDA always the main Triton kernel: torch 2.11's flex-decoding lowering, which AUTO picks for fewer
    # than 128 queries, failed to compile (NoValidChoicesError) when a 64-query tree followed 8-query ones
    return {"kernel_options": {"BACKEND": "TRITON"}} if q.is_cuda else {}


@functools.cache
def flex_kernel(cuda: bool):
    """flex_attention, compiled on CUDA (the CPU path is torch's unfused reference)."""
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=True) if cuda else flex_attention


def flash_computes(dtype: torch.dtype, qk_dim: int, v_dim: int) -> bool:
    """What flash-attn 2 takes: fp16 / bf16, one head size for q, k and v (not MLA's), at most 256."""
    return dtype in (torch.float16, torch.bfloat16) and qk_dim == v_dim <= 256


def _flash_takes(q: torch.Tensor, v: torch.Tensor) -> bool:
    return q.is_cuda and flash_computes(q.dtype, q.shape[-1], v.shape[-1])


@takes_sinks
def flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
          sinks: torch.Tensor | None = None) -> torch.Tensor:
    """flash-attn for plain causal attention (mask=None) on CUDA; masked calls (trees, batches with padding) and
    what flash-attn cannot compute (float32, MLA's head sizes, attention sinks) go to FlexAttention. flash-attn is
    optional: without it this backend is refused when chosen."""
    if mask is not None or sinks is not None or not _flash_takes(q, v):
        return flex(q, k, v, mask, scale, sinks)
    from flash_attn import flash_attn_func

    out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale, causal=True)
    return out.transpose(1, 2)


@functools.cache   # asked per attention call by auto: importlib's search costs ~75 us, per layer per step
def has_flash_attn() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


@takes_sinks
def auto(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
         sinks: torch.Tensor | None = None) -> torch.Tensor:
    """The default, chosen by measurement (benchmarks/bench_attention.py): causal calls (mask=None: prefill,
    decode, chains) take flash-attn on CUDA when it is installed, else SDPA, whose own flash kernel takes them;
    what flash-attn cannot compute (float32, MLA's head sizes) takes SDPA; masked calls (trees, padded batches)
    take SDPA with the boolean mask (its fused memory-efficient kernel on
    CUDA). FlexAttention stays a spec choice (``decoding.attention: flex``, or ``flash`` = flash-attn + flex):
    at verification shapes (8-64 queries) its per-call overhead made it 5-8x slower than masked SDPA on an
    H100 with torch 2.11. Calls with attention sinks take sdpa (flash-attn takes none)."""
    if mask is None and sinks is None and _flash_takes(q, v) and has_flash_attn():
        return flash(q, k, v, mask, scale)
    return sdpa(q, k, v, mask, scale, sinks)
