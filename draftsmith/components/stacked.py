"""Sibling projections that read the same input run as one matrix product: q | k | v, gate | up (gpt-fast's wqkv
and w13).

Measured (benchmarks/bench_gemm.py on an H100, bf16; /tmp/qkv on this project's CPU, one thread): a decode
step's layer products take 0.94x the time at 8B and 0.83x at 1B on CUDA, and SmolLM2's q, k, v, gate and up
products 0.71-0.75x on CPU (oneDNN prepacked, 1-6 rows): one bigger product reads the input once and launches
(or packs) once where three or two small ones pay that each.

:func:`stack` concatenates the siblings' weights into one tensor and makes each sibling's weight a view of its
rows, so memory is not doubled and names, shapes, ``state_dict`` and in-place updates stay the siblings' own (a
write through a view is a write to the stacked weight, and bumps its version, which a prepacked copy keys on). A
module that holds a :class:`Stacked` calls it first; it answers None (run the siblings one by one) when the
siblings no longer view the stacked weight (``.to()`` moved them, a weight was replaced) or autograd wants their
gradients. FP8 siblings of one setting stack the same way, their row scales with their rows (:class:`Stacked`'s
protocol), so an FP8 target quantizes a layer's input for q | k | v and gate | up once each too."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from draftsmith.components.fused import constant_in_traces


class Stacked:
    """``Stacked(linears)(x) -> (y_1, ..., y_n)`` as ``linears[i](x)``, from one product, or None.

    A sibling that stores its weight otherwise (an FP8 linear: :class:`draftsmith.components.quant.FP8Weight`)
    says how through its own methods, so nothing here knows a format: ``stack_key()`` (settings siblings must
    share), ``stack_rows()`` (its buffers whose rows follow the weight's: local name -> weight rows per buffer
    row), ``stack_shared()`` (buffers siblings must hold equal, used once), ``stack_copies()`` (buffers that
    become one row each in the stacked product, as copies: local name -> its [out, ...] rows) and
    ``stacked_twin(weight, bias, buffers)`` (the module computing the stacked product). The stored ``weight``
    parameter is what is stacked."""

    def __init__(self, linears: Sequence[nn.Linear]):
        first = linears[0]
        rows = _rows(first)
        with torch.no_grad():
            weight = torch.cat([_stored(l) for l in linears])
            bias = None if first.bias is None else torch.cat([l.bias for l in linears])
            buffers = {name: torch.cat([l._buffers[name] for l in linears]) for name in rows}
            copies = [_copies(l) for l in linears]
            buffers |= {name: torch.cat([c[name] for c in copies]) for name in copies[0]}
        twin = getattr(first, "stacked_twin", None)
        self.linear = twin(weight, bias, {**buffers, **{n: first._buffers[n] for n in _shared(first)}}) if twin \
            else _plain(first.in_features, weight, bias)
        self.sizes = [l.out_features for l in linears]
        self.parts = list(linears)
        # what valid() follows, the same for every sibling (one stack_key): row views by pointer (name -> weight
        # rows per buffer row); shared and copied buffers by pointer and version
        self._rows, self._tracked = rows, (*_shared(first), *copies[0])
        for l in linears:
            l.stacked_part = True   # packed.py leaves it alone: the stacked product is what runs
        self._view_parts()

    def _view_parts(self) -> None:
        """Each sibling's weight, bias and row buffers made views of its rows of the stacked product's."""
        weight, bias, start = _stored(self.linear), self.linear._parameters.get("bias"), 0
        for l, n in zip(self.parts, self.sizes):
            l._parameters["weight"] = nn.Parameter(weight[start:start + n], requires_grad=_stored(l).requires_grad)
            if bias is not None:
                l.bias = nn.Parameter(bias[start:start + n], requires_grad=l.bias.requires_grad)
            for name, per in self._rows.items():
                l._buffers[name] = self.linear._buffers[name][start // per: -(-(start + n) // per)]
            start += n
        self._ptrs = self._views()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_was_valid": self.valid()}

    def __setstate__(self, state: dict) -> None:
        # copy.deepcopy and pickle copy each parameter on its own (nn.Parameter's deepcopy clones): a copy's
        # siblings are made views of the copy's stacked tensors again, so that it runs the one product and holds
        # the weights once (its siblings, copied before it, are whole modules by now). A stack its siblings had
        # left (a weight replaced or cast, a copied scale written) stays left: its tensors are the old ones
        was_valid = state.pop("_was_valid", False)
        self.__dict__.update(state)
        if was_valid:
            self._view_parts()
        else:
            self._ptrs = None

    def rebase(self, weight: torch.Tensor) -> None:
        """Make ``weight`` (equal to the stacked weight: a view of a bigger tensor holding it, experts.ExpertStack)
        the stacked product's weight, and the siblings views of it again."""
        self.linear._parameters["weight"] = nn.Parameter(weight, requires_grad=False)
        self._view_parts()

    def _views(self) -> tuple:
        # views are followed by pointer (an in-place write through one is the stacked tensor's); a shared buffer (a
        # static input scale: the stacked product reads the first sibling's) or a copied one (a per-tensor scale, one
        # per row there) by pointer and version, so that any change to one sibling's runs the siblings one by one
        return tuple((_stored(l).data_ptr(), None if l.bias is None else l.bias.data_ptr(),
                      *(l._buffers[n].data_ptr() for n in self._rows),
                      *((l._buffers[n].data_ptr(), l._buffers[n]._version) for n in self._tracked))
                     for l in self.parts)

    # torch.compile cannot compare data pointers (a graph break in every layer): a trace decides this once, in Python
    # (guarded by the object's identity), as a CUDA graph's capture does; a weight replaced later is not seen by it
    @constant_in_traces
    def valid(self) -> bool:
        return self._views() == self._ptrs and _stored(self.parts[0]).device == _stored(self.linear).device

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
        if not self.valid():
            return None
        if torch.is_grad_enabled() and (x.requires_grad or any(_stored(l).requires_grad for l in self.parts)):
            return None
        # x: [..., in] -> n tensors [..., out_i] (views of one [..., sum(out_i)] product)
        return self.linear(x).split(self.sizes, dim=-1)


def _stored(linear: nn.Module) -> torch.Tensor:
    return linear._parameters["weight"]


def _rows(linear: nn.Module) -> dict[str, int]:
    rows = getattr(linear, "stack_rows", None)
    return rows() if rows else {}


def _copies(linear: nn.Module) -> dict[str, torch.Tensor]:
    copies = getattr(linear, "stack_copies", None)
    return copies() if copies else {}


def _shared(linear: nn.Module) -> tuple[str, ...]:
    shared = getattr(linear, "stack_shared", None)
    return shared() if shared else ()


def _plain(in_features: int, weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Linear:
    linear = nn.Linear(in_features, weight.shape[0], bias=bias is not None, device="meta")
    linear.weight = nn.Parameter(weight, requires_grad=False)
    if bias is not None:
        linear.bias = nn.Parameter(bias, requires_grad=False)
    return linear


def stackable(linears: Sequence[nn.Module]) -> bool:
    """``nn.Linear`` siblings with the same input width, dtype, device and bias-ness: plain ones, or ones of a
    stacking protocol (Stacked's) with the same ``stack_key()``, row buffers whose rows no sibling but the last
    ends inside of, and equal shared buffers."""
    if len(linears) < 2:
        return False
    first = linears[0]
    if type(first) is nn.Linear:
        if any(type(l) is not nn.Linear for l in linears):
            return False
    elif not all(isinstance(l, nn.Linear) and hasattr(l, "stack_key") for l in linears) \
            or any(l.stack_key() != first.stack_key() for l in linears):
        return False
    elif any(l.out_features % per for l in linears[:-1] for per in first.stack_rows().values()) or \
            any(not torch.equal(l._buffers[n], first._buffers[n]) for l in linears for n in _shared(first)):
        return False
    return all(l.in_features == first.in_features and _stored(l).dtype == _stored(first).dtype
               and _stored(l).device == _stored(first).device and (l.bias is None) == (first.bias is None)
               for l in linears)


def stack(linears: Sequence[nn.Module]) -> Stacked | None:
    return Stacked(linears) if stackable(linears) else None


def stack_model(module: nn.Module) -> list[Stacked]:
    """Call ``stack_siblings()`` on every submodule that has it (attention, MLP, MoE), children before parents (an
    MoE layer stacks its experts' stacks); returns the stacks made."""
    done = []
    for sub in reversed(list(module.modules())):
        fn = getattr(sub, "stack_siblings", None)
        if callable(fn):
            done += fn()
    return done
