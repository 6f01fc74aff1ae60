"""Counting the kernels a step would launch on CUDA, on any device, the CPU included.

At batch 1 a CUDA decode step is mostly launches of small kernels (see benchmarks/results/h100.md), and inside a
CUDA graph each one still costs ~1-3 us of device time. The count does not depend on the device or on the model's
width, so a CPU test can hold the engine to a kernel budget per layer and per step, and a change that adds
launches shows up without a GPU. :class:`LaunchCounter` counts every dispatched aten operator that computes
(views, ``empty`` and host reads launch nothing); inside :meth:`LaunchCounter.fused` a function that
``components.fused`` compiles into one kernel on CUDA counts once, as it would launch there.
"""
from __future__ import annotations

import contextlib
import functools
from collections import Counter
from typing import Callable, Iterator

from torch.utils._python_dispatch import TorchDispatchMode

from draftsmith.components import fused as F

_FREE = {"empty", "empty_like", "empty_strided", "_local_scalar_dense", "lift_fresh", "detach", "alias",
         "_reshape_alias", "resolve_conj", "resolve_neg", "set_", "record_stream", "is_same_size",
         "_has_compatible_shallow_copy_type", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset"}


def launches(func) -> bool:
    """Whether an aten overload runs a kernel: not a view (every output aliases an input without writing it) and
    not a free operator (allocation, metadata, a host read)."""
    if func.overloadpacket.__name__ in _FREE:
        return False
    rets = func._schema.returns
    return not (rets and all(r.alias_info is not None and not r.alias_info.is_write for r in rets))


class LaunchCounter(TorchDispatchMode):
    """``with LaunchCounter() as c: ...`` then ``c.count`` (total) and ``c.by_op`` (which operators)."""

    def __init__(self):
        super().__init__()
        self.by_op: Counter[str] = Counter()
        self._quiet = 0

    @property
    def count(self) -> int:
        return sum(self.by_op.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self._quiet and launches(func):
            self.by_op[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def fused(self) -> Iterator["LaunchCounter"]:
        """Count each function that ``components.fused`` would compile as one launch, while the eager function
        computes the values: the kernels CUDA launches for a model with its ``fused`` flags set
        (:func:`fused.fuse_model`) and for pools built meanwhile (``fused.wanted`` answers yes). Inductor may emit
        a few kernels for one function (a sort, a reduction), so this is a lower bound on CUDA."""
        def one(fn: Callable) -> Callable:
            @functools.wraps(fn)
            def run(*args, **kwargs):
                self.by_op[f"fused.{fn.__name__}"] += 1
                self._quiet += 1
                try:
                    return fn(*args, **kwargs)
                finally:
                    self._quiet -= 1
            return run

        original = F._compiled, F.wanted
        F._compiled, F.wanted = functools.cache(one), lambda setting, device: True
        try:
            yield self
        finally:
            F._compiled, F.wanted = original
