"""A paged KV pool shared by the target's and the draft's attention layers.

The engine decodes over :class:`~draftsmith.decoding.static_pool.StaticKVPool` (preallocated, device-side slot
map, fixed shapes for CUDA graphs); this pool, with its host-side page tables, is the readable reference for
compaction (invariants 13-21) that the static pool's commit is tested against.

The pool owns fixed-size pages of ``page_size`` token slots. Each sequence has a page table and a committed
length; the token at position ``p`` lives in slot ``table[p // page_size] * page_size + p % page_size``. Storage
is, per layer, a dict of named tensors ``[num_pages * page_size, *per_token_shape]``: GQA uses
``{"kv": (2, n_kv, d)}`` (keys beside values), MLA ``{"latent": (r,), "rope": (d_rope,)}``. The layout is data, so one
code path serves both.

A decoding step reserves slots with :meth:`PagedKVPool.extend`, writes the verified tree's KV there, then
:meth:`PagedKVPool.commit` keeps the accepted nodes: row ``length + select[d]`` moves to ``length + d`` in every
layer and every tensor, and pages left holding no committed position go back to the free list.
:func:`compact_rows` moves hidden states and predicted tokens with the same index map (invariant 19).

Growth replaces the storage tensors (capacity doubles), so hold the pool, not ``pool.storage[i][name]``,
across calls to :meth:`PagedKVPool.extend`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from draftsmith.components.attention import store_rows


def _move_rows_(buf: Tensor, src: Tensor, dst: Tensor) -> None:
    # buf: [N, ...] changed in place; src, dst: [m] row ids, dst distinct.
    # index_select copies every source before index_copy_ writes any destination, so a destination that is
    # also a source (overlapping ranges) is read before it is overwritten.
    buf.index_copy_(0, dst, buf.index_select(0, src))


def compact_rows(buf: Tensor, start: int | Tensor, select: Tensor) -> Tensor:
    """Return a copy of ``buf`` whose row ``start + d`` holds row ``start + select[d]`` (gather, then scatter).

    buf: [T, ...] with select [m] and start an int; or buf [B, T, ...] with select [B, m] and start an int or
    [B]. A 2-D select is what makes the call batched: expand a shared select to [B, m]. Negative entries of
    select are padding (sequences that accepted fewer nodes); their rows are left as they are. ``buf`` itself
    is not modified.
    """
    if select.dim() == 1:
        return compact_rows(buf.unsqueeze(0), start, select.unsqueeze(0)).squeeze(0)
    if select.dim() != 2 or buf.dim() < 2 or select.shape[0] != buf.shape[0]:
        raise ValueError(f"select {tuple(select.shape)} does not fit buf {tuple(buf.shape)}")
    B, T = buf.shape[:2]
    select = select.to(device=buf.device, dtype=torch.long)
    start = torch.as_tensor(start, dtype=torch.long, device=buf.device).expand(B)  # [B]
    b, d = (select >= 0).nonzero(as_tuple=True)  # kept entries, each [n]
    base = b * T + start[b]  # flat row of position start in batch row b
    flat = buf.reshape(B * T, *buf.shape[2:]).clone()
    _move_rows_(flat, base + select[b, d], base + d)
    return flat.view(buf.shape)


@dataclass
class _Seq:
    table: list[int] = field(default_factory=list)  # page ids, position order
    length: int = 0  # committed positions
    pending: int = 0  # reserved by extend(), positions length..length+pending-1


class SlotIO:
    """``write`` / ``read`` by slot over ``self.storage[layer][name]`` [slots, *shape]: the attention interface,
    shared by the paged pool and the static one."""

    storage: list[dict[str, Tensor]]
    device: torch.device

    def write(self, layer: int, slots: Tensor, **values: Tensor) -> None:
        """Store ``values[name]`` [*slots.shape, *shape] at ``slots``; every tensor of the layer, no other."""
        store = self.storage[layer]
        if values.keys() != store.keys():
            raise ValueError(f"layer {layer} stores {sorted(store)}, got {sorted(values)}")
        idx = slots.reshape(-1).to(self.device)
        for name, v in values.items():
            t = store[name]
            if tuple(v.shape) != (*slots.shape, *t.shape[1:]):
                raise ValueError(f"layer {layer} {name!r}: expected {(*slots.shape, *t.shape[1:])}, "
                                 f"got {tuple(v.shape)}")
            store_rows(t, idx, v)

    def read(self, layer: int, slots: Tensor) -> dict[str, Tensor]:
        """slots [B, S] (any shape) -> {name: [B, S, *shape]} (a copy)."""
        idx = slots.reshape(-1).to(self.device)
        return {name: t.index_select(0, idx).view(*slots.shape, *t.shape[1:])
                for name, t in self.storage[layer].items()}


class PagedKVPool(SlotIO):
    """Fixed-size pages of KV slots shared by many sequences and many layers (see the module docstring).

    ``storage[layer][name]`` is the tensor ``[num_pages * page_size, *shape]`` for ``layouts[layer][name]``.
    """

    def __init__(self, layouts: Sequence[Mapping[str, tuple[int, ...]]], *, page_size: int = 1,
                 num_pages: int = 256, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
        if page_size < 1 or num_pages < 1:
            raise ValueError(f"page_size and num_pages must be >= 1, got {page_size} and {num_pages}")
        self.page_size = page_size
        self.dtype, self.device = dtype, torch.device(device)
        self.layouts = [{name: tuple(shape) for name, shape in layout.items()} for layout in layouts]
        self._num_pages = num_pages
        self.storage: list[dict[str, Tensor]] = [
            {name: torch.zeros(num_pages * page_size, *shape, dtype=dtype, device=self.device)
             for name, shape in layout.items()} for layout in self.layouts]
        self._free = list(range(num_pages - 1, -1, -1))  # a stack: pop() hands out low ids first
        self._seqs: dict[int, _Seq] = {}
        self._next_id = 0

    # --- pages -----------------------------------------------------------------------------------------------
    @property
    def free_pages(self) -> int:
        return len(self._free)

    @property
    def num_pages(self) -> int:
        """Current capacity in pages (doubles when the free list runs out)."""
        return self._num_pages

    def pages(self, seq: int) -> list[int]:
        return list(self._seq(seq).table)

    def _seq(self, seq: int) -> _Seq:
        try:
            return self._seqs[seq]
        except KeyError:
            raise KeyError(f"unknown sequence {seq}; live: {sorted(self._seqs)}") from None

    def _grow(self) -> None:
        old, new = self._num_pages, 2 * self._num_pages
        for layer in self.storage:
            for name, t in layer.items():
                bigger = t.new_zeros(new * self.page_size, *t.shape[1:])
                bigger[: t.shape[0]] = t
                layer[name] = bigger
        self._free[:0] = range(new - 1, old - 1, -1)  # below the stack: freed old pages are reused first
        self._num_pages = new

    def _resize(self, s: _Seq, n_pages: int) -> None:
        # Give the table exactly n_pages pages: free the tail or take new pages from the free list.
        while len(s.table) > n_pages:
            self._free.append(s.table.pop())
        while len(self._free) < n_pages - len(s.table):
            self._grow()
        while len(s.table) < n_pages:
            s.table.append(self._free.pop())

    def _pages_for(self, n_tokens: int) -> int:
        return -(-n_tokens // self.page_size)

    def _slot_of(self, s: _Seq, pos: Tensor) -> Tensor:
        # pos: [n] positions (CPU, int64) -> [n] slots
        table = torch.tensor(s.table, dtype=torch.long)
        return table[pos // self.page_size] * self.page_size + pos % self.page_size

    # --- sequences -------------------------------------------------------------------------------------------
    def add_sequence(self) -> int:
        seq, self._next_id = self._next_id, self._next_id + 1
        self._seqs[seq] = _Seq()
        return seq

    def drop_sequence(self, seq: int) -> None:
        self._resize(self._seq(seq), 0)
        del self._seqs[seq]

    def length(self, seq: int) -> int:
        return self._seq(seq).length

    def extend(self, seq: int, n: int) -> Tensor:
        """Reserve positions length..length+n-1 and return their slots [n] int64.

        Replaces any earlier uncommitted reservation; pages it no longer needs are freed.
        """
        s = self._seq(seq)
        if n < 0:
            raise ValueError(f"extend by {n} tokens; n must be >= 0")
        self._resize(s, self._pages_for(s.length + n))
        s.pending = n
        return self._slot_of(s, torch.arange(s.length, s.length + n)).to(self.device)

    def commit(self, seq: int, select: Sequence[int] | Tensor | None = None) -> None:
        """Keep the pending tokens ``select`` (strictly increasing, relative to the reservation; None = all).

        Row ``length + select[d]`` moves to ``length + d`` in every layer and tensor (gather, then scatter);
        length grows by ``len(select)``; pages holding no position < length are freed. A chain
        (``select == range(m)``) moves nothing.
        """
        s = self._seq(seq)
        sel = (torch.arange(s.pending) if select is None
               else torch.as_tensor(select, dtype=torch.long).cpu())
        m = sel.numel()
        if sel.dim() != 1 or (m and (sel[0] < 0 or sel[-1] >= s.pending or (sel[1:] <= sel[:-1]).any())):
            raise ValueError(f"select must be strictly increasing indices into the {s.pending} pending "
                             f"tokens, got {sel.tolist()}")
        if m and sel[-1] != m - 1:  # strictly increasing from >= 0: identity exactly when it ends at m - 1
            src = self._slot_of(s, s.length + sel).to(self.device)
            dst = self._slot_of(s, s.length + torch.arange(m)).to(self.device)
            for layer in self.storage:
                for t in layer.values():
                    _move_rows_(t, src, dst)
        s.length += m
        s.pending = 0
        self._resize(s, self._pages_for(s.length))

    def rollback(self, seq: int, length: int) -> None:
        """Drop committed positions >= length (and any pending reservation); free whole pages past it."""
        s = self._seq(seq)
        if not 0 <= length <= s.length:
            raise ValueError(f"rollback to {length}: sequence {seq} has {s.length} committed positions")
        s.length, s.pending = length, 0
        self._resize(s, self._pages_for(length))

    # --- data ------------------------------------------------------------------------------------------------
    def slots(self, seqs: Sequence[int], total: Sequence[int]) -> Tensor:
        """[B, S] slots of positions 0..total[b]-1 (committed + pending); S = max(total); padding is slot 0."""
        out = torch.zeros(len(seqs), max(total, default=0), dtype=torch.long)
        for b, (seq, n) in enumerate(zip(seqs, total, strict=True)):
            s = self._seq(seq)
            if not 0 <= n <= s.length + s.pending:
                raise ValueError(f"sequence {seq} holds {s.length} committed + {s.pending} pending positions, "
                                 f"asked for {n}")
            out[b, :n] = self._slot_of(s, torch.arange(n))
        return out.to(self.device)

