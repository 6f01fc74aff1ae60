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
gradients."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class Stacked:
    """``Stacked(linears)(x) -> (y_1, ..., y_n)`` as ``linears[i](x)``, from one product, or None."""

    def __init__(self, linears: Sequence[nn.Linear]):
        first = linears[0]
        with torch.no_grad():
            weight = torch.cat([l.weight for l in linears])
            bias = None if first.bias is None else torch.cat([l.bias for l in linears])
        self.linear = nn.Linear(first.in_features, weight.shape[0], bias=bias is not None, device="meta")
        self.linear.weight = nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            self.linear.bias = nn.Parameter(bias, requires_grad=False)
        self.sizes = [l.out_features for l in linears]
        self.parts = list(linears)
        start = 0
        for l, n in zip(linears, self.sizes):   # each sibling's weight becomes a view of its rows
            l.stacked_part = True               # packed.py leaves it alone: the stacked product is what runs
            l.weight = nn.Parameter(weight[start:start + n], requires_grad=l.weight.requires_grad)
            if bias is not None:
                l.bias = nn.Parameter(bias[start:start + n], requires_grad=l.bias.requires_grad)
            start += n
        self._ptrs = self._views()

    def _views(self) -> tuple:
        return tuple((l.weight.data_ptr(), None if l.bias is None else l.bias.data_ptr()) for l in self.parts)

    def valid(self) -> bool:
        return self._views() == self._ptrs and self.parts[0].weight.device == self.linear.weight.device

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
        if not self.valid():
            return None
        if torch.is_grad_enabled() and (x.requires_grad or any(l.weight.requires_grad for l in self.parts)):
            return None
        # x: [..., in] -> n tensors [..., out_i] (views of one [..., sum(out_i)] product)
        return self.linear(x).split(self.sizes, dim=-1)


def stackable(linears: Sequence[nn.Module]) -> bool:
    """Plain ``nn.Linear`` siblings with the same input width, dtype, device and bias-ness."""
    if len(linears) < 2 or any(type(l) is not nn.Linear for l in linears):
        return False
    first = linears[0]
    return all(l.in_features == first.in_features and l.weight.dtype == first.weight.dtype
               and l.weight.device == first.weight.device and (l.bias is None) == (first.bias is None)
               for l in linears)


def stack(linears: Sequence[nn.Module]) -> Stacked | None:
    return Stacked(linears) if stackable(linears) else None


def stack_model(module: nn.Module) -> list[Stacked]:
    """Call ``stack_siblings()`` on every submodule that has it (attention, MLP); returns the stacks made."""
    done = []
    for sub in module.modules():
        fn = getattr(sub, "stack_siblings", None)
        if callable(fn):
            done += fn()
    return done
