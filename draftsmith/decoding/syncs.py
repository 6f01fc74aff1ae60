"""Counting host synchronisations on any device, the CPU included.

On CUDA a host sync is any call that needs a tensor's value on the host: ``.item()``, ``.tolist()``, ``int(t)``,
``bool(t)`` (an ``if`` on a tensor), a copy to the CPU, ``nonzero`` and boolean-mask indexing (their output
shape depends on the data), ``torch.equal``. On the CPU these cost nothing, so they go unnoticed there;
:class:`SyncCounter` counts the same calls on any device, which lets a CPU test hold the engine to its budget
(at most one host sync per verification step: the accepted lengths). ``torch.cuda.set_sync_debug_mode`` is the
CUDA-side check (tests/gpu)."""
from __future__ import annotations

from collections import Counter

import torch
from torch.overrides import TorchFunctionMode

_T = torch.Tensor
# functions whose result needs the tensor's data on the host
_READS = {_T.item, _T.tolist, _T.__int__, _T.__bool__, _T.__float__, _T.__index__, _T.cpu, _T.numpy,
          _T.nonzero, torch.nonzero, torch.equal, _T.equal, torch.allclose, _T.allclose, _T.masked_select,
          torch.masked_select, torch.unique, _T.unique, _T.__len__}
_INDEXING = {_T.__getitem__, _T.__setitem__, _T.index_put_, torch.index_put}


def _is_bool_index(idx) -> bool:
    parts = idx if isinstance(idx, tuple) else (idx,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


class SyncCounter(TorchFunctionMode):
    """``with SyncCounter() as c: ...`` then ``c.count`` (total) and ``c.by_name`` (which calls)."""

    def __init__(self):
        super().__init__()
        self.by_name: Counter[str] = Counter()

    @property
    def count(self) -> int:
        return sum(self.by_name.values())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if func in _READS:
            self.by_name[name] += 1
        elif func in _INDEXING and _is_bool_index(_second(args, kwargs, "indices")):
            self.by_name[f"{name}[bool]"] += 1
        elif func in (_T.to,) and _to_cpu(args, kwargs):
            self.by_name["to(cpu)"] += 1
        elif func in (_T.repeat_interleave, torch.repeat_interleave) and \
                isinstance(_second(args, kwargs, "repeats"), torch.Tensor):
            self.by_name["repeat_interleave(tensor)"] += 1
        return func(*args, **kwargs)


def _second(args, kwargs, name: str):
    """The argument after the tensor, given by position or as ``name``."""
    return args[1] if len(args) > 1 else kwargs.get(name)


def _to_cpu(args, kwargs) -> bool:
    dev = kwargs.get("device", args[1] if len(args) > 1 else None)
    if isinstance(dev, (str, torch.device)):
        return torch.device(dev).type == "cpu" and isinstance(args[0], torch.Tensor) and args[0].device.type != "cpu"
    return False
