"""One-row products on CUDA, chosen by measurement: cuBLAS or inductor's reduction (``decoding.linear: auto``).

At batch 1 a decode step's products are matrix-vector products, and cuBLAS leaves bandwidth unused on the small
ones: on an H200 (``benchmarks/bench_gemv.py``, benchmarks/results/h200.md) o_proj 4096x4096 took 1.58x its
bandwidth time and down_proj 4096x14336 1.10x plus a split-K sum kernel, where inductor's reduction of ``(x *
w).sum(-1)`` took 1.47x and 1.02x in one kernel; on the wide products (q|k|v, gate|up, the head) cuBLAS won by
1.08-1.32x. Which form wins is a property of the GPU, the shape and the cuBLAS build, so it is measured, never
assumed: the first one-row call of a shape outside a graph capture (a graph's warm-up runs make it) times both
forms on the layer's own weight, the L2 cache flushed before each call (a step's 32 layers never find a weight in
it), checks that they agree, and keeps the reduction only where it took under :data:`MARGIN` of cuBLAS's time.
:data:`CHOICES` records each shape's times and choice. Only products no wider than deep are tried (out <= in):
each try compiles a kernel, and the wide ones lost.

:func:`choose_products` puts :class:`ChosenProduct` in front of the plain ``nn.Linear`` of a module whose fused
kernels run (CUDA), as packed.py does for the CPU: names, weights and ``state_dict`` stay the Linear's, and with
``fused`` off, on the CPU, for more than one row, or under autograd, ``nn.Linear.forward`` runs as before."""
from __future__ import annotations

import functools
import logging
import math
import statistics
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from draftsmith.components.fused import allow_recompiles, tracing
from draftsmith.components.mixins import mixed

log = logging.getLogger("draftsmith")

MARGIN = 0.97          # the reduction is kept where its time is under this fraction of cuBLAS's
TOLERANCE = 0.02       # |reduction - cuBLAS| <= this x max |cuBLAS| (bf16 roundings differ by ~0.004)
REPEATS = 21           # timed calls per form (the median is kept)
FLUSH_BYTES = 512 << 20   # written before each timed call: more than any GPU's L2, and ~0.1 ms of device time,
                          # so the product is queued before the device reaches it (its launch is not timed)
DEVICES = ("cuda",)    # where one-row products are chosen (tests add "cpu", with their own timer)


@dataclass(frozen=True)
class Choice:
    form: str            # "cublas" or "reduction"
    cublas_us: float
    reduction_us: float  # nan where the reduction did not run or disagreed
    why: str = ""


CHOICES: dict[tuple, Choice] = {}   # (weight shape, weight dtype, input dtype, bias, device) -> its choice


def reduction(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    # x [..., K], weight [N, K], bias [N] | None -> [..., N]: products and their sums in float32, cast to x's dtype
    # (what cuBLAS computes for bf16: float32 accumulation); compiled, nothing [N, K]-sized is materialised
    y = (x.unsqueeze(-2).to(torch.float32) * weight.to(torch.float32)).sum(-1)
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y.to(x.dtype)


@functools.cache
def compiled_reduction() -> Callable:
    """:func:`reduction` compiled per shape (static: one kernel tuned for each product's N and K)."""
    allow_recompiles()
    return torch.compile(reduction, dynamic=False)


def cuda_us(fn: Callable, args: tuple, repeats: int = REPEATS) -> float:
    """Median device time of ``fn(*args)`` in microseconds, the L2 cache flushed before each call."""
    device = args[0].device
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)
    fn(*args)                                    # compiles, loads the kernel
    marks = []
    for _ in range(repeats):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        marks.append((start, end))
    torch.cuda.synchronize(device)
    return statistics.median(s.elapsed_time(e) for s, e in marks) * 1e3


TIMER: Callable[[Callable, tuple], float] = cuda_us   # tests set their own


def choose(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> Choice:
    """Time cuBLAS and the compiled reduction on ``x`` (one row) and keep the faster; the reduction only where it
    ran and agreed with cuBLAS to :data:`TOLERANCE` of the output's magnitude."""
    args = (x, weight, bias)
    cublas = TIMER(F.linear, args)
    fast = compiled_reduction()
    try:
        got, want = fast(*args).float(), F.linear(*args).float()
    except Exception as e:  # noqa: BLE001 - a form that does not compile here is simply not chosen
        return Choice("cublas", cublas, math.nan, f"the reduction raised {type(e).__name__}: {e}"[:300])
    err, size = (got - want).abs().max().item(), want.abs().max().item()
    if not err <= TOLERANCE * size:   # NaN too
        return Choice("cublas", cublas, math.nan, f"the reduction differed by {err:.3g} (largest output {size:.3g})")
    timed = TIMER(fast, args)
    return Choice("reduction" if timed < MARGIN * cublas else "cublas", cublas, timed)


def product(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for a one-row ``x``, by the form chosen for its shape (cuBLAS while a graph is
    captured or torch.compile traces before one is chosen: the choice syncs)."""
    key = (tuple(weight.shape), weight.dtype, x.dtype, bias is not None, weight.device)
    choice = CHOICES.get(key)
    if choice is None:
        if tracing(x):
            return F.linear(x, weight, bias)
        choice = CHOICES[key] = choose(x, weight, bias)
        log.info("draftsmith: one-row product %s: %s (cuBLAS %.1f us, reduction %.1f us)%s", tuple(weight.shape),
                 choice.form, choice.cublas_us, choice.reduction_us, f"; {choice.why}" if choice.why else "")
    return compiled_reduction()(x, weight, bias) if choice.form == "reduction" else F.linear(x, weight, bias)


def tried(linear: nn.Module) -> bool:
    """A product :func:`choose_products` gives a choice: a plain Linear (not a stacked sibling: its stacked product
    runs), no wider than deep."""
    return type(linear) is nn.Linear and not getattr(linear, "stacked_part", False) \
        and linear.out_features <= linear.in_features


class ChosenProduct:
    """Mixin placed in front of ``nn.Linear`` by :func:`choose_products` (:func:`mixins.mixed`)."""

    PREFIX = "Chosen"

    fused = False   # fused.fuse_model switches it with the module's other fused kernels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if not (self.fused and x.device.type in DEVICES and x.numel() == x.shape[-1]) or (
                torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)):
            return super().forward(x)
        return product(x, w, self.bias)


def choose_products(module: nn.Module, setting: str, fast: bool) -> list[str]:
    """The spec's ``decoding.linear`` on CUDA: ``auto`` (where the fused kernels run, ``fast``) gives every product
    :func:`tried` takes a measured choice; returns their names. ``packed`` / ``plain`` keep cuBLAS."""
    if not (fast and setting == "auto"):
        return []
    done = []
    for name, sub in module.named_modules():
        if tried(sub):
            sub.__class__ = mixed(ChosenProduct, type(sub))
            done.append(name)
    return done


def describe(skip=()) -> list[str]:
    """A line per shape chosen so far but those in ``skip`` (for benchmarks): its form and both times."""
    return [f"{'x'.join(map(str, key[0]))} {str(key[1]).removeprefix('torch.')}: {c.form} (cuBLAS {c.cublas_us:.1f} "
            f"us, reduction {c.reduction_us:.1f} us){'; ' + c.why if c.why else ''}"
            for key, c in CHOICES.items() if key not in skip]
