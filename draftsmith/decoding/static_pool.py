"""A KV pool with static addresses: preallocated, one contiguous region of ``capacity`` slots per batch row.

The engine sizes it up front (longest prompt + max_new_tokens + the largest tree or scratch), so storage is never
replaced mid-generation and every forward sees the same tensors: what a CUDA graph needs. The slot map is
arithmetic on the device: position ``p`` of row ``b`` lives in slot ``b * capacity + p``; one extra slot at the
end (``trash``) takes the writes of padding rows, so a write never needs a boolean mask. Committed lengths
``lens`` [rows] live on the device and change in place.

It speaks the same interface as :class:`~draftsmith.decoding.kvpool.PagedKVPool` for attention components
(``write``, ``read``, ``storage``, ``layouts``), plus :meth:`view`, the whole pool as ``[rows, capacity, ...]``
without a copy: a KVBatch built by :func:`fixed_kv` is ``static`` (its ``read`` is every row's whole region, its
``write`` has no -1), so an attention layer may attend over the view with the mask instead of gathering.
:meth:`commit` is the paged pool's compaction (invariants 13-19) with index tensors on the device.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from draftsmith.components.attention import KVBatch
from draftsmith.components.fused import kernel
from draftsmith.decoding.kvpool import SlotIO


class StaticKVPool(SlotIO):
    # on the CPU (eager, nothing captured, reading the lengths costs nothing) a forward attends over the keys some
    # row may see, not the whole capacity (see fixed_kv); never on CUDA or with fused kernels, where a step is one
    # graph at fixed shapes. Tests that count the host reads CUDA would make switch it off.
    eager_trim = True
    # elsewhere (CUDA, fused, graphs) a forward attends over every row's first ``span`` slots, None = the capacity:
    # runners.KeySpans sets it before each step from a host-side bound on the lengths (inflight.Reach), rounded up
    # to a bucket (:meth:`bucket`, at most the call's own need), so that attention and the scrub read what the
    # context needs, not the capacity, and a step's graph is captured once per bucket. Left None, every forward
    # sees the whole capacity (single forwards)
    span: int | None = None
    min_span = 256   # the smallest bucket (tests lower it to exercise several)

    def __init__(self, layouts: Sequence[Mapping[str, tuple[int, ...]]], *, rows: int, capacity: int,
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu", fused: bool = False):
        if rows < 1 or capacity < 1:
            raise ValueError(f"rows and capacity must be >= 1, got {rows} and {capacity}")
        self.rows, self.capacity = rows, capacity
        # fused: the index arithmetic of a forward (fixed_kv) and of compaction runs as compiled kernels (the
        # engine's step functions follow this flag too: components.fused, CUDA only)
        self.fused = fused
        self.dtype, self.device = dtype, torch.device(device)
        self.layouts = [{name: tuple(shape) for name, shape in layout.items()} for layout in layouts]
        # layers with the same layout share one tensor per name, [layers, slots, *shape], so that compaction is
        # two index ops per name for all those layers; storage[layer][name] is that layer's (contiguous) view
        groups: dict[tuple, list[int]] = {}
        for i, layout in enumerate(self.layouts):
            groups.setdefault(tuple(sorted(layout.items())), []).append(i)
        self._stacked: list[Tensor] = []
        self.storage: list[dict[str, Tensor]] = [{} for _ in self.layouts]
        for key, members in groups.items():
            for name, shape in key:
                t = torch.zeros(len(members), rows * capacity + 1, *shape, dtype=dtype, device=self.device)
                self._stacked.append(t)
                for j, layer in enumerate(members):
                    self.storage[layer][name] = t[j]
        self.trash = rows * capacity
        self.lens = torch.zeros(rows, dtype=torch.long, device=self.device)   # committed positions per row
        self.base = torch.arange(rows, device=self.device) * capacity         # slot of each row's position 0
        self.key = torch.arange(capacity, device=self.device)                 # position of each key in a row

    def reset(self) -> None:
        self.lens.zero_()

    def bucket(self, need: int) -> int:
        """The span holding ``need`` slots: the next power of two, at least :attr:`min_span`, at most the capacity."""
        return min(self.capacity, max(self.min_span, 1 << max(0, need - 1).bit_length()))

    @property
    def trims(self) -> bool:
        # not while torch.compile traces: the trim reads the lengths (a graph break), the span does not
        return self.eager_trim and not self.fused and self.device.type == "cpu" and not torch.compiler.is_compiling()

    # --- the attention interface (same meaning as PagedKVPool) ---------------------------------------------
    def view(self, layer: int) -> dict[str, Tensor]:
        """{name: [rows, capacity, *shape]}: every row's region, no copy (what a static KVBatch reads)."""
        n = self.rows * self.capacity
        return {name: t[:n].view(self.rows, self.capacity, *t.shape[1:]) for name, t in self.storage[layer].items()}

    def scrub(self, keep: Tensor) -> None:
        """Zero in place, in every layer and tensor, the slots ``keep`` [rows, S] leaves out among each row's first
        S: past the committed length and attended by no query of the coming forward (stale rows, rejected nodes,
        poison). A layer attends over its view of the pool with a mask, and a masked score still multiplies its
        value, so NaN there would leak (invariant 16). One kernel per stacked tensor for all layers, before the
        forward, in place of a copy of every layer's keys."""
        S = keep.shape[1]
        n = self.rows * self.capacity
        for t in self._stacked:
            region = t[:, :n].view(t.shape[0], self.rows, self.capacity, -1)[:, :, :S]   # [layers, rows, S, *]
            zero_unless_(region, keep[None, :, :, None])

    # --- compaction ------------------------------------------------------------------------------------------
    def commit(self, path: Tensor, accepted: Tensor, active: Tensor) -> None:
        """Keep each active row's accepted path: position ``lens + path[b, d]`` moves to ``lens + d`` in every
        layer and tensor (gather, then scatter); lens grows by accepted + 1.

        path: [B, D+1] node indices relative to lens, -1 after the accepted ones (a verdict's path);
        accepted [B] = the number of non-negative entries minus one; active: [B] bool."""
        src, dst, grown = kernel(commit_index, self.fused)(path, accepted, active, self.base, self.lens, self.trash)
        for t in self._stacked:
            t.index_copy_(1, dst, t.index_select(1, src))
        self.lens.copy_(grown)

    def advance(self, counts: Tensor) -> None:
        """Commit ``counts`` [B] positions written in place (prefill, decode, the draft's catch-up)."""
        self.lens += counts


def capacity_for(need: int) -> int:
    """The pool capacity for ``need`` slots: the smallest of 2^k x {1, 1.25, 1.5, 1.75}, at least 64, that holds
    them (64, 80, 96, 112, 128, 160, ...), so that calls of nearby sizes share a pool and its captured steps while
    less than a fifth of it goes unused (memory only: a step attends over its key span, runners.KeySpans)."""
    if need <= 64:
        return 64
    step = (1 << (need - 1).bit_length()) // 8   # a quarter of the octave need is in
    return -(-need // step) * step


_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.bfloat16: torch.int16,
         torch.float16: torch.int16,
         **{getattr(torch, name): torch.uint8 for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                                           "float8_e5m2fnuz") if hasattr(torch, name)}}


def zero_unless_(x: torch.Tensor, keep: torch.Tensor) -> None:
    """In place: +0.0 where not ``keep`` (broadcast), NaN and inf included, in one kernel on a strided view too. An
    integer product of the bit patterns, because CPU ``masked_fill_`` / ``where`` over a broadcast mask is ~4x
    slower."""
    bits = _BITS.get(x.dtype)
    if bits is None:
        x.copy_(x.where(keep, 0))
    else:
        x.view(bits).mul_(keep)


def commit_index(path: Tensor, accepted: Tensor, active: Tensor, base: Tensor, lens: Tensor, trash: int):
    # -> src, dst [B * (D+1)] slots of the moves (gather src, scatter dst; inactive rows and the -1 tail move the
    # trash slot onto itself) and the new lengths [B]
    d = torch.arange(path.shape[1], device=path.device)
    keep = (path >= 0) & active.unsqueeze(1)                                   # [B, D+1]
    start = (base + lens).unsqueeze(1)
    src = torch.where(keep, start + path, trash).view(-1)
    dst = torch.where(keep, start + d, trash).view(-1)
    return src, dst, lens + (accepted + 1) * active


def fixed_kv(pool: StaticKVPool, rows: Tensor, rel_pos: Tensor, rel_mask: Tensor | None,
             fresh: bool = False) -> tuple[KVBatch, Tensor]:
    """A static KVBatch over the whole pool, built on the device from the committed lengths.

    rows: [B, T] pending offset (past lens) each new token writes, -1 = padding (written to the trash slot);
    rel_pos: [B, T] its position past lens; rel_mask: [B, T, P] which pending offsets it attends to besides the
    committed prefix. Returns the KVBatch (mask [B, 1, T, capacity]) and positions [B, T]. A padding row attends
    to its row's slot 0 only, so no attention row is empty; the slots past a row's length that no query attends
    are zeroed in the pool first (:meth:`StaticKVPool.scrub`; invariant 16: poisoned rows change nothing).

    fresh: a prefill into an empty pool (lens 0) whose rows are causal and right-padded (``rel_mask`` is then
    not read, and may be None): layers attend over the new tokens alone, without a mask (:class:`KVBatch`
    ``fresh``)."""
    if fresh:
        write, pos = kernel(fresh_index, pool.fused)(pool.base, pool.trash, rows, rel_pos)
        return KVBatch(pool, write, None, None, static=True, fresh=True), pos
    key = pool.key
    if pool.trims:
        # no key at or past max(lens) + P is attended: the index is worked out over that span of the pool alone
        # (its arithmetic is per key), layers read that span, and when no key of it is dead (batch 1, a
        # verification, a decode) there is nothing to zero (a 4k-token context: the capacity-wide mask and the
        # zeroing of dead keys were most of a decode step's attention time)
        key = key[:min(int(pool.lens.max()) + rel_mask.shape[-1], pool.capacity)]
    elif pool.span is not None:
        key = key[:pool.span]   # runners.KeySpans' bound: no row's length + P reaches past it
    write, read, mask, keep, pos = kernel(kv_index, pool.fused)(pool.lens, pool.base, key, pool.trash,
                                                                rows, rel_pos, rel_mask)
    if pool.trims:
        keep = None if bool(keep.all()) else keep
        if keep is None and mask.shape[-2] == 1 and bool(mask.all()):
            mask = None   # one query per row that sees every key of the span (a decode): no mask to apply
    if keep is not None:
        pool.scrub(keep)
    return KVBatch(pool, write, read, mask, static=True), pos


def fresh_index(base: Tensor, trash: int, rows: Tensor, rel_pos: Tensor):
    # kv_index for an empty pool: base [B], rows, rel_pos [B, T] -> write [B, T], pos [B, T]
    live = rows >= 0
    return torch.where(live, base.unsqueeze(1) + rows, trash), torch.where(live, rel_pos, 0)


def kv_index(lens: Tensor, base: Tensor, key: Tensor, trash: int, rows: Tensor, rel_pos: Tensor, rel_mask: Tensor):
    # fixed_kv's arithmetic, pure: lens, base [B], key [S] (the pool's) -> write [B, T], read [B, S],
    # mask [B, 1, T, S], keep [B, S] (False: a key past lens that no query attends), pos [B, T]
    B, T = rows.shape
    P, S = rel_mask.shape[-1], key.shape[0]
    lens, base = lens.unsqueeze(1), base.unsqueeze(1)                          # [B, 1]
    live = rows >= 0
    write = torch.where(live, base + lens + rows, trash)
    rel = key - lens                                                           # [B, S] pending offset of each key
    committed = rel < 0
    seen = rel_mask.gather(2, rel.clamp(0, P - 1).unsqueeze(1).expand(B, T, S)) & (~committed & (rel < P))[:, None]
    # a live row attends the committed keys and the pending ones its rel_mask names; a padding row slot 0 alone
    mask = torch.where(live.unsqueeze(-1), committed.unsqueeze(1) | seen, key == 0)   # [B, T, S]
    pos = torch.where(live, lens + rel_pos, 0)
    live_keys = mask.any(1)                                                    # [B, S] keys some query attends
    # a key nobody attends reads the row's position 0 (always committed), so a gathering layer sees finite data
    read = base + torch.where(live_keys, key, 0)
    return write, read, mask.unsqueeze(1), live_keys | committed, pos
