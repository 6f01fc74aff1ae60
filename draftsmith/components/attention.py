"""Grouped-query attention over the paged KV pool.

The caller hands every layer the same :class:`KVBatch` for one forward: where the new tokens' K/V go, which
slots to read back, and the boolean mask (prefix + tree structure) over them, or None when that mask is plain
causal. Without a KVBatch the layer
runs plain causal self-attention (parity tests, training).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from draftsmith.components.dims import Dims
from draftsmith.components.fused import kernel
from draftsmith.components.stacked import Stacked, stack

Backend = Callable[..., torch.Tensor]


@dataclass
class KVBatch:
    pool: Any             # draftsmith.decoding.kvpool.PagedKVPool
    write: torch.Tensor   # [B, T] slot of each new token, -1 for padding (never written)
    read: torch.Tensor    # [B, S] slots to attend over (committed prefix + the new tokens)
    mask: torch.Tensor | None  # [B, 1, T, S] bool, True = attend; None = bottom-right causal (the flash path;
                               # with one query, every key)
    # static: write has no -1 (padding rows write a scratch slot) and the S keys are the first S slots of every
    # row's region of the pool, in order (S = the capacity, or the step's key span: runners.KeySpans on CUDA, the
    # keys any row attends on the eager CPU path), so a layer may write without a boolean mask and attend over
    # ``pool.view(layer)[:, :S]`` (no gather, no host sync: what a CUDA graph needs). That view also holds rows past
    # the committed length; the ones no query attends were zeroed before the forward (``StaticKVPool.scrub``: masked
    # scores still multiply their values). read / write / mask keep their meaning for any layer.
    static: bool = False
    # fresh: the new tokens are every key (a prefill: nothing committed, each row from position 0, right-padded),
    # so a layer stores its K/V and attends over them alone, causally (mask None: the flash path, no mask or
    # read to build, no key past the prompt to zero; a padding query sees padding keys, and nothing reads it)
    fresh: bool = False
    # what every layer of this forward computes alike, made by the first layer that needs it (the rotary angles:
    # Rotary.angles); a KVBatch lives for one forward, so nothing here outlives the positions it was made for
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def exchange(self, layer: int, **new: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """Store this forward's rows of every tensor a layer caches and return what it attends over, with the mask.

        new: {name: [B, T, *shape]} (the layer's ``cache_layout``) -> ({name: [B, S, *shape]}, mask). One place for
        the static (graph-safe: no boolean indexing, no gather) and the paged path, for any attention layout."""
        if self.static:
            self.pool.write(layer, self.write, **new)
            return (new, None) if self.fresh else self._attended(layer)
        valid = self.write >= 0
        self.pool.write(layer, self.write[valid], **{name: t[valid] for name, t in new.items()})
        if self.fresh:
            return new, None
        return self.pool.read(layer, self.read), self.mask

    def exchange_made(self, layer: int, name: str, make: Callable, args: tuple,
                      fused: bool) -> tuple[Any, dict[str, torch.Tensor], torch.Tensor | None]:
        """:meth:`exchange` for a layer that caches one tensor, ``name``, whose rows a pure function makes:
        ``make(*args)`` -> (out, rows [B, T, *shape]); -> (out, what the layer attends over, mask).

        On the static path with fused kernels (CUDA graphs), past the prefill, one compiled function makes the rows
        and stores them (:func:`made_and_stored`: inductor writes them into the pool in place from the kernel that
        computes them, so a layer's rope, K/V row and store are one launch, not three). Elsewhere ``make``
        (compiled when ``fused``), then :meth:`exchange`."""
        if self.static and self.pool.fused and not self.fresh and self.pool.storage[layer].keys() == {name}:
            store = self.pool.storage[layer][name]   # (another layout: exchange's checked write and its error)
            return kernel(made_and_stored, True)(make, args, store, self.write.reshape(-1)), *self._attended(layer)
        out, rows = kernel(make, fused)(*args)
        return out, *self.exchange(layer, **{name: rows})

    def _attended(self, layer: int) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        # the static path's keys: every row's first S slots (S: the capacity, or a span of it), and the mask
        S = self.read.shape[-1]
        return {name: t[:, :S] for name, t in self.pool.view(layer).items()}, self.mask


def made_and_stored(make: Callable, args: tuple, store: torch.Tensor, slots: torch.Tensor) -> Any:
    # make(*args) -> (out, rows [B, T, *shape]); the rows stored at slots [B * T] (store_rows); -> out
    out, rows = make(*args)
    store_rows(store, slots, rows)
    return out


def store_rows(store: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor) -> None:
    # rows [*slots.shape, *shape] into a pool's tensor store [slots, *shape] at slots (1-D), in place, in its dtype
    # (a static pool's tensor: a CUDA graph reads it by address). The one way rows enter a KV pool
    # (decoding.kvpool.SlotIO.write too)
    store.index_copy_(0, slots, rows.reshape(slots.numel(), *store.shape[1:]).to(store.dtype))


class GQAttention(nn.Module):
    def __init__(
        self,
        dims: Dims,
        *,
        in_width: int,
        layer_idx: int,
        rope: nn.Module,
        backend: Backend,
        qkv_bias: bool = False,
        o_bias: bool = False,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
        sinks: bool = False,
        scale: float | None = None,
    ):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = dims.heads, dims.kv_heads, dims.head_dim
        self.scale = dims.head_dim**-0.5 if scale is None else scale   # the scores' factor (Gemma's: its own)
        self.layer_idx, self.backend, self.rope = layer_idx, backend, rope
        self.q_proj = nn.Linear(in_width, dims.heads * dims.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(in_width, dims.kv_heads * dims.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(in_width, dims.kv_heads * dims.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(dims.heads * dims.head_dim, dims.hidden, bias=o_bias)
        self.q_norm = q_norm or nn.Identity()
        self.k_norm = k_norm or nn.Identity()
        # a learned logit per head joining each query's softmax, no value (gpt-oss): the backend takes it
        self.sinks = nn.Parameter(torch.empty(dims.heads)) if sinks else None
        self.qkv: Stacked | None = None      # stacked.stack_model: q | k | v as one product

    def stack_siblings(self) -> list[Stacked]:
        self.qkv = stack([self.q_proj, self.k_proj, self.v_proj])
        return [self.qkv] if self.qkv else []

    def cache_layout(self) -> dict[str, tuple[int, ...]]:
        """Per-token shapes this layer stores in the KV pool: keys and values side by side, so that a forward
        stores them with one write."""
        return {"kv": (2, self.kv_heads, self.head_dim)}

    def forward(self, x: torch.Tensor, pos: torch.Tensor, kv: KVBatch | None = None) -> torch.Tensor:
        # x: [B, T, in_width]; pos: [B, T] absolute positions
        B, T, _ = x.shape
        qkv = self.qkv(x) if self.qkv else None
        q, k, v = qkv or (self.q_proj(x), self.k_proj(x), self.v_proj(x))
        q = self.q_norm(q.view(B, T, self.heads, self.head_dim))
        k = self.k_norm(k.view(B, T, self.kv_heads, self.head_dim))
        v = v.view(B, T, self.kv_heads, self.head_dim)
        mask = None
        if kv is None:
            q, k = self.rope(q, k, pos)
        else:
            make, args = self.rope.kv_rows(q, k, v, pos, kv.memo)  # rows: [B, T, 2, nKV, d]
            q, got, mask = kv.exchange_made(self.layer_idx, "kv", make, args, self.rope.fused)
            k, v = got["kv"].unbind(2)                             # [B, S, nKV, d] each
        more = {} if self.sinks is None else {"sinks": self.sinks}
        out = self.backend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask, self.scale, **more)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, self.heads * self.head_dim))
