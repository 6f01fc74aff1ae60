"""CUDA graphs for fixed-shape steps: the same function runs eagerly (CPU, ``graphs: off``) or is captured once
per input shape and replayed (CUDA). The engine captures whole steps (every forward of a speculative step and
the tensor work between them); draftsmith.scale.timing captures single forwards to time them.

A forward over a :class:`~draftsmith.decoding.static_pool.StaticKVPool` reads only tensors with static addresses
(the pool's storage and lengths, the weights) plus its arguments, so a graph captured with static copies of the
arguments replays it exactly: :class:`Replay` copies the new arguments into those buffers and replays. The
outputs are the graph's own buffers, overwritten by its next replay: consume or clone them first.

Capture runs the function for real a few times first (warm-up on a side stream, as torch.cuda.graphs asks).
A forward is idempotent (it writes the same K/V to the same slots); a step also advances the pools' lengths,
which ``keep`` saves, restores before each warm-up run and restores after the capture, so every warm-up writes
where the real call will (past those lengths, in slots written again before they are read) and never further. If capture
fails (an attention component that syncs, e.g. boolean-mask writes) the shape falls back to eager with a
warning, so correctness never depends on capture."""
from __future__ import annotations

import logging
import weakref
from collections.abc import Callable

import torch

from draftsmith.errors import OptionError
from draftsmith.specs.schema import CUDA_ONLY_GRAPHS

log = logging.getLogger("draftsmith")


def graphs_enabled(setting: str, device: str | torch.device) -> bool:
    """``decoding.graphs``: auto = on for CUDA devices, on / compile = required (refused without CUDA), off =
    eager."""
    cuda = torch.device(device).type == "cuda"
    if setting in CUDA_ONLY_GRAPHS and not cuda:
        raise OptionError(f"decoding.graphs: {setting} needs a CUDA device, got {device!r} (use auto or off)")
    return cuda and setting in ("auto", "on", "compile")


class _Captured:
    def __init__(self, graph, inputs, outputs):
        self.graph, self.inputs, self.outputs = graph, inputs, outputs


class Replay:
    """``Replay(fn, enabled)(*tensors) -> fn(*tensors)``; one CUDA graph per argument shape when enabled."""

    def __init__(self, fn: Callable[..., tuple[torch.Tensor, ...]], enabled: bool, pool=None, warmup: int = 2,
                 keep: tuple[torch.Tensor, ...] = ()):
        # keep: state the function changes in place (a pool's lengths): saved before the warm-up runs and restored
        # after capture, so capturing a stateful step (one that commits) leaves the state as it found it
        self.fn, self.enabled, self.warmup, self.keep = fn, enabled, warmup, keep
        self.pool = pool if pool is not None or not enabled else torch.cuda.graph_pool_handle()
        self.graphs: dict[tuple, _Captured | None] = {}

    def __call__(self, *args: torch.Tensor):
        if not self.enabled:
            return self.fn(*args)
        key = tuple((tuple(a.shape), a.dtype) for a in args)
        if key not in self.graphs:
            self.graphs[key] = self._capture(args)
        g = self.graphs[key]
        if g is None:
            return self.fn(*args)
        for buf, a in zip(g.inputs, args):
            buf.copy_(a, non_blocking=True)
        g.graph.replay()
        return g.outputs

    def _capture(self, args) -> _Captured | None:
        saved = [t.clone() for t in self.keep]

        def restore() -> None:
            for t, v in zip(self.keep, saved):
                t.copy_(v)

        try:
            return self._capture_graph(args, restore)
        finally:
            restore()

    def _warm_up(self, inputs, restore: Callable[[], None], runs: int | None = None):
        """The real runs before a capture, each from the state the real call sees (``restore``): a committing step
        would otherwise write further each time, past the rows the pool was sized for. Returns the last output."""
        out = None
        for _ in range(self.warmup if runs is None else runs):
            restore()
            out = self.fn(*inputs)
        return out

    def _capture_graph(self, args, restore: Callable[[], None]) -> _Captured | None:
        inputs = [a.clone() for a in args]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.stream(side):
                self._warm_up(inputs, restore)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                outputs = self.fn(*inputs)
        except Exception as e:  # noqa: BLE001 - any capture failure means: run this shape eagerly
            torch.cuda.synchronize()
            log.warning("draftsmith: CUDA graph capture failed for shapes %s, running eagerly: %s",
                        [tuple(a.shape) for a in args], e)
            return None
        return _Captured(graph, inputs, outputs)


def spoil_(t: torch.Tensor) -> None:
    """In place, a value no correct read expects: NaN, the integer type's least value, booleans flipped."""
    if t.is_floating_point():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.logical_not_()
    else:
        t.fill_(torch.iinfo(t.dtype).min)


class _Pool:
    """An emulated graph memory pool: the EmulatedReplays that share it (a StepCache's)."""

    def __init__(self):
        self.members: weakref.WeakSet = weakref.WeakSet()


class EmulatedReplay(Replay):
    """A CPU stand-in for :class:`Replay` with a graph's buffer semantics, for tests: the function always runs on
    the same static input buffers and returns the same output tensors, overwritten by the next call with the same
    shapes. A caller that keeps a graph's output past the next replay gets different results here, as it would on
    CUDA. (Not emulated: the function runs again each call, so it sees a tensor rebound outside its arguments,
    which a graph, reading the old one by address, would not.)

    Graphs that share a memory pool (``pool``, as runners.StepCache shares one) may overwrite each other's outputs
    when they replay: here every call first spoils the outputs of every other graph of its pool (NaN, the integer
    type's least value, booleans flipped), after its inputs are copied, so a caller that reads a step's outputs
    after another graph replayed fails here too."""

    def __init__(self, fn, enabled: bool = True, pool=None, warmup: int = 2, keep=()):
        # enabled: Replay's signature, so that it stands in for Replay (always on)
        super().__init__(fn, False, warmup=warmup, keep=keep)
        self.enabled, self.pool = True, pool if pool is not None else _Pool()
        self.pool.members.add(self)

    def _capture_graph(self, args, restore):
        inputs = [a.clone() for a in args]   # the warm-up runs a capture makes (Replay's own), each for real
        outputs = tuple(o.clone() for o in self._warm_up(inputs, restore, max(self.warmup, 1)))
        return _Captured(None, inputs, outputs)

    def __call__(self, *args):
        key = tuple((tuple(a.shape), a.dtype) for a in args)
        if key not in self.graphs:
            self.graphs[key] = self._capture(args)
        g = self.graphs[key]
        for buf, a in zip(g.inputs, args):
            buf.copy_(a)
        for other in [c for r in self.pool.members for c in r.graphs.values() if c is not g]:
            for out in other.outputs:
                spoil_(out)
        for buf, o in zip(g.outputs, self.fn(*g.inputs)):
            buf.copy_(o)
        return g.outputs
