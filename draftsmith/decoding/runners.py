"""The runners a step calls and what they run over: a model and its static KV pool behind one forward
(:class:`TargetRunner`, :class:`DraftRunner`), the cache of captured steps (:class:`StepCache`), and the key span
each step launched over the pools attends (:class:`KeySpans`).

On CUDA a forward attends over every row's first ``span`` slots of its pool, not the whole capacity: the span is a
power-of-two bucket (StaticKVPool.bucket; at most the capacity and the call's need rounded up to 64) of a bound on
the rows' lengths that the host holds without reading the device (inflight.Reach), and each bucket has its own
captured step. The CPU trims the keys exactly instead (static_pool.fixed_kv).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import torch

from draftsmith.components.fused import kernel
from draftsmith.decoding.graphs import Replay
from draftsmith.decoding.inflight import Reach
from draftsmith.decoding.static_pool import StaticKVPool, fixed_kv
from draftsmith.decoding.stats import Stats

V = TypeVar("V")


def clock() -> float:
    """time.perf_counter, or 0 while torch.compile traces: a clock read would break its graph, and a traced forward's
    time is not its trace's (a compiled or captured step is timed by its caller)."""
    return 0.0 if torch.compiler.is_compiling() else time.perf_counter()


class _Addressed:
    """The runners' shared step: the static pool's addresses and masks for a forward (:func:`fixed_kv`), timed
    into the run's statistics (``addressing_seconds``, a part of ``forward_seconds``)."""

    pool: StaticKVPool
    stats: Stats

    def addressed(self, rows, rel_pos, rel_mask, prompt_lens):
        t0 = clock()
        out = fixed_kv(self.pool, rows, rel_pos, rel_mask, fresh=prompt_lens is not None)
        self.stats.addressing_seconds += clock() - t0
        return out


class TargetRunner(_Addressed):
    """The target + its pool: ``(ids, rows, rel_pos, rel_mask) -> (logits [B, T, V], hand-over [B, T, Hh])``.
    With ``prompt_lens`` [B] the forward is the prefill of an empty pool (:func:`fixed_kv` ``fresh``; rel_mask
    unused) and the logits are made at each row's last prompt token only, [B, V] (a long prompt's [B, T, V] never
    exists)."""

    def __init__(self, model, pool: StaticKVPool, taps, graphs: bool):
        self.model, self.pool, self.taps = model, pool, taps
        self.stats = Stats()  # the run's statistics (forward time): speculative() / baseline() point this at theirs
        self.steps = StepCache(graphs)          # the decode and speculative steps over this pool, as CUDA graphs

    def forward(self, ids, rows, rel_pos, rel_mask, prompt_lens=None, hand_over=True):
        # hand_over False: nobody drafts from this forward (target-only decoding), so no taps are gathered
        kv, pos = self.addressed(rows, rel_pos, rel_mask, prompt_lens)
        taps = (self.taps or ()) if hand_over else ()
        hidden, aux = self.model(ids, pos, kv, taps=taps)
        handover = None if not hand_over else aux if taps else hidden
        if prompt_lens is not None:
            (hidden,) = last_rows(prompt_lens, hidden)
        return self.model.logits(hidden), handover

    def __call__(self, ids, rows, rel_pos, rel_mask, prompt_lens=None, hand_over=True):
        t0 = clock()
        out = self.forward(ids, rows, rel_pos, rel_mask, prompt_lens, hand_over)
        self.stats.forward_seconds += clock() - t0
        return out


class DraftRunner(_Addressed):
    """The draft + its pool; ``from_target``: hidden is the target's hand-over (through fc) or the draft's own.
    ``prompt_lens`` [B]: the prefill, as for :class:`TargetRunner`; feed and logits at the last token, [B, *].
    ``last`` [B]: feed and logits at each row's token ``last - 1`` only, [B, *] (the catch-up: its head over one
    row, not all of them)."""

    def __init__(self, model, pool: StaticKVPool, embed, head):
        self.model, self.pool, self.embed, self.head = model, pool, embed, head
        self.stats = Stats()

    def forward(self, ids, hidden, rows, rel_pos, rel_mask, *, from_target: bool, prompt_lens=None, last=None):
        kv, pos = self.addressed(rows, rel_pos, rel_mask, prompt_lens)
        _, feed, head_in = self.model(ids, hidden, pos, kv, embed=self.embed, from_target=from_target,
                                      head_input=True)
        if prompt_lens is not None:   # a prefill's prompt lengths vary: not compiled
            feed, head_in = last_rows(prompt_lens, feed, head_in)
        elif last is not None:
            feed, head_in = kernel(last_rows, self.pool.fused)(last, feed, head_in)
        return feed, self.model.head_of(head_in, self.head)   # [B, T, Vd], or [B, Vd] at ``last``

    def __call__(self, ids, hidden, rows, rel_pos, rel_mask, *, from_target: bool, prompt_lens=None, last=None):
        t0 = clock()
        out = self.forward(ids, hidden, rows, rel_pos, rel_mask, from_target=from_target, prompt_lens=prompt_lens,
                           last=last)
        dt = clock() - t0
        self.stats.forward_seconds += dt
        self.stats.draft_seconds += dt
        return out


class StepCache:
    """One :class:`Replay` per step function and settings: on CUDA a whole step (every forward, the tree, the
    verdict, the compaction) is one CUDA graph, captured at its first call and replayed after; on CPU it runs
    eagerly. ``keep``: the pool lengths the step advances, restored after capture (see Replay).

    Every graph of a cache draws from one CUDA memory pool, so the buffers a step holds that do not depend on the
    key span (logits, MLP activations) exist once, not once per span bucket and step kind. PyTorch calls sharing
    a pool safe for graphs replayed in capture order, never concurrently; these replay in any order (a long prompt
    captures the larger spans first) and each consumes the last one's outputs, so a replay may overwrite another
    graph's outputs. That is safe here because every step's outputs are read before the next replay is queued,
    on the same stream: Replay copies them into the next graph's own input buffers (allocated outside any
    capture), inflight.HostCopy copies what the host reads right after the step, and nothing else reads them;
    and no tensor a graph reads was made inside another graph's capture (caches are filled by the warm-up runs,
    outside capture). EmulatedReplay checks the first on the CPU: a replay there overwrites the outputs of every
    other graph of its pool. tests/gpu/test_graphs.py replays graphs out of capture order."""

    def __init__(self, graphs: bool, size: int = 32):
        # size: settings x key spans (one graph per bucket, KeySpans.next) a process alternates between
        self.graphs, self.size = graphs, size
        self.replays: dict[tuple, Replay] = {}
        self.pool = None   # the memory pool, made with the first Replay

    def get(self, key: tuple, fn, keep: tuple[torch.Tensor, ...]) -> Replay:
        def made() -> Replay:
            replay = Replay(fn, self.graphs, pool=self.pool, keep=keep)
            self.pool = replay.pool   # the first Replay's pool is every later one's
            return replay

        return lru_get(self.replays, key, self.size, made, self._dropped)

    def _dropped(self, _: Replay) -> None:
        if not any(g is not None for r in self.replays.values() for g in r.graphs.values()):
            self.pool = None   # no captured graph holds the pool any more: PyTorch may have released it

    def clear(self) -> None:
        """Drop every step: their functions hold the runner that holds this cache (a cycle only the cyclic garbage
        collector would free, and GPU memory pressure never runs it), so an evicted runner frees its graphs and
        pools at once."""
        self.replays.clear()
        self.pool = None


def lru_get(cache: dict, key, size: int, make: Callable[[], V], dropped: Callable[[V], None]) -> V:
    """``cache[key]``, made by ``make()`` when missing; a hit becomes the most recently used, and a cache of
    ``size`` entries drops its least recently used first (``dropped`` is given it)."""
    if key in cache:
        cache[key] = cache.pop(key)
    else:
        if len(cache) >= size:
            dropped(cache.pop(next(iter(cache))))
        cache[key] = make()
    return cache[key]


def last_rows(counts: torch.Tensor, *rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # counts [B] >= 1, rows [B, T, *] each -> [B, *] each: the row at counts - 1
    b = torch.arange(counts.shape[0], device=counts.device)
    return tuple(r[b, counts - 1] for r in rows)


class KeySpans:
    """The key span of each step launched over ``pools`` (their lengths are bounded together): the bucket of the
    longest row the host last read plus ``per_step`` for each step in flight (inflight.Reach) plus ``margin``, the
    slots a step writes and attends past a row's length; at most ``need`` (the most slots the call's rows reach,
    engine.slots_needed) rounded up to 64, which a pool's capacity bucket may pass by a fifth: calls whose needs
    round up to the same multiple of 64 share their last span's graph. As a context it gives the pools their whole
    capacity back when the run ends or fails (single forwards and a later prefill see every slot)."""

    def __init__(self, pools: tuple[StaticKVPool, ...], longest: int, per_step: int, margin: int, need: int):
        self.pools, self.margin, self.reach = pools, margin, Reach(longest, per_step)
        self.last = -(-need // 64) * 64

    def next(self) -> int:
        """The span of the step about to launch, set on every pool; the step counts as in flight from here."""
        span = min(self.pools[0].bucket(self.reach.bound() + self.margin), self.last)
        for pool in self.pools:
            pool.span = span
        self.reach.launched()
        return span

    def seen(self, longest: int) -> None:
        """The longest row after the oldest step in flight, read back with its tokens."""
        self.reach.seen(longest)

    def __enter__(self) -> KeySpans:
        return self

    def __exit__(self, *exc) -> None:
        for pool in self.pools:
            pool.span = None
