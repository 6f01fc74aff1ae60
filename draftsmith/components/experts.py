"""A mixture-of-experts layer's experts as two stacked tensors, so that a CUDA graph runs only the chosen experts.

Eagerly :class:`~draftsmith.components.moe.SparseMoE` looks up which rows chose each expert (a host read per
layer), which a CUDA graph cannot; without this module a graph runs every expert over every row (n_experts / top_k
times the weight bytes: 16x for Qwen3-30B-A3B's 128 / 8, 32x for DeepSeek-V3's 256 / 8). :class:`ExpertStack` makes
every expert's gate | up weight a view of one [experts, 2 * width, hidden] tensor and its down weight a view of one
[experts, hidden, width] tensor (memory is not doubled; names, ``state_dict`` and in-place writes stay the
experts' own, as :mod:`~draftsmith.components.stacked` does for q | k | v), and :func:`grouped` computes the layer
from them with ``torch._grouped_mm``: the (row, expert) pairs sorted by expert, one product over each expert's
rows, nothing read for an expert no row chose, no host synchronisation (static shapes: rows x top_k pairs).

Whether the grouped product runs here (``_grouped_mm`` wants bfloat16 on a Hopper GPU in some torch builds, row
strides of 16 bytes) and agrees with the loop is measured, never assumed: the first eager call of a shape on a
device in :data:`DEVICES` runs both and records the verdict in :data:`VERDICTS` (a graph's warm-up runs make that
call); a graph captured without a verdict, or after the experts stopped viewing the stack (``.to()`` moved them, a
weight was replaced), runs every expert as before. Each row's experts are summed in ascending expert order, as the
loop adds them. torch.compile takes the grouped form where a verdict says so and its fake tensors run it too
(:func:`traceable`): torch 2.13's ``_grouped_mm`` rule for them takes bfloat16 only, where the CPU runs float32.

:func:`grouped` also takes per-expert biases and any activation of the gate | up product (``moe: stacked``'s clamped
SwiGLU over interleaved columns: stacked_moe.StackedExperts, whose tensors are stacked already). A stack is any object
with ``key``, ``valid`` and ``grouped_args`` (:class:`ExpertStack`'s); :func:`probe`, :func:`taken` and
:func:`traceable` serve both kinds, and moe.routed chooses between the forms for both."""
from __future__ import annotations

import functools
import logging

import torch
from torch import nn

from draftsmith.components.fused import constant_in_traces, kernel, silu_mul

log = logging.getLogger("draftsmith")

TOLERANCE = 0.02       # |grouped - loop| <= this x max |loop| (bf16 products round in another order)
DEVICES = ("cuda",)    # where the grouped form is tried (tests add "cpu")
VERDICTS: dict[tuple, bool] = {}   # (stack shapes, dtype, top_k, device) -> the grouped form ran and agreed
TRACEABLE: dict[tuple, bool] = {}  # the same keys -> torch.compile's fake tensors take the grouped form (traceable)


class ExpertStack:
    """``experts`` (SwiGLU modules whose gate | up already run as one :class:`Stacked` product) re-based onto one
    gate | up and one down tensor; :meth:`valid` says whether they still view them."""

    def __init__(self, experts: list[nn.Module]):
        self.experts = experts
        with torch.no_grad():
            self.gate_up = torch.stack([e.gate_up.linear.weight for e in experts])   # [E, 2W, H]
            self.down = torch.stack([e.down_proj.weight for e in experts])           # [E, H, W]
        for i, e in enumerate(experts):   # each weight keeps its requires_grad (Stacked's parts do)
            e.gate_up.rebase(self.gate_up[i])
            trained = e.down_proj.weight.requires_grad
            e.down_proj._parameters["weight"] = nn.Parameter(self.down[i], requires_grad=trained)
        self.shapes = tuple(self.gate_up.shape), tuple(self.down.shape)
        self.ptrs = self._ptrs()

    def __getstate__(self) -> dict:
        # copy.deepcopy and pickle copy each parameter on its own (Stacked's rule): a copy stacks its own experts
        # again, rather than holding a second copy of the stacked tensors; a stack its experts had left stays left
        return {"experts": self.experts, "was_valid": self.valid()}

    def __setstate__(self, state: dict) -> None:
        if state["was_valid"]:
            self.__init__(state["experts"])
        else:
            self.experts, self.gate_up, self.down, self.shapes, self.ptrs = state["experts"], None, None, None, None

    def _ptrs(self) -> tuple:
        return tuple((e.gate_up.linear.weight.data_ptr(), e.down_proj.weight.data_ptr()) for e in self.experts)

    @constant_in_traces   # a trace decides it once, as a capture does (stacked.Stacked.valid)
    def valid(self) -> bool:
        return all(e.gate_up.valid() for e in self.experts) and self._ptrs() == self.ptrs

    def key(self, x: torch.Tensor, top_k: int) -> tuple:
        return self.shapes, x.dtype, top_k, x.device

    def grouped_args(self, eager: bool = False) -> dict:
        """:func:`grouped`'s keyword arguments: the stacked tensors and the experts' activation (``eager``: never its
        compiled twin; traceable's meta tensors)."""
        act = kernel(silu_mul, self.experts[0].fused and not eager)
        return {"gate_up": self.gate_up, "down": self.down, "act": functools.partial(halves, act)}

    def __call__(self, x: torch.Tensor, chosen: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return run(self, x, chosen, weights)


def plain(tensors: list[torch.Tensor]) -> bool:
    """Tensors a graph's grouped product may read: floats of 2 bytes or more (not FP8), of one dtype, on one device
    of :data:`DEVICES` (elsewhere no graph runs them)."""
    return bool(tensors) and tensors[0].device.type in DEVICES and all(
        t.dtype.is_floating_point and t.element_size() >= 2 for t in tensors) \
        and len({t.dtype for t in tensors}) == 1 and len({t.device for t in tensors}) == 1


def stackable(experts: list[nn.Module]) -> bool:
    """Experts of :func:`plain` weights, without biases, each with its gate | up stacked (an FP8 expert's stacked twin
    is not a plain Linear: such layers keep the every-expert graph path)."""
    def linear(m: nn.Module) -> bool:
        return isinstance(m, nn.Linear) and m.bias is None and not hasattr(m, "stack_key")
    return all(e.gate_up is not None and linear(e.gate_up.linear) and linear(e.down_proj) for e in experts) \
        and plain([t for e in experts for t in (e.gate_up.linear.weight, e.down_proj.weight)])


def halves(act, h: torch.Tensor) -> torch.Tensor:
    """``act(gate, up)`` of h's two halves (a SwiGLU's gate | up product)."""
    return act(*h.chunk(2, dim=-1))


def run(stack, x: torch.Tensor, chosen: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """:func:`grouped` over ``stack``'s tensors (its ``grouped_args``)."""
    return grouped(x, chosen, weights, **stack.grouped_args())


def grouped(x: torch.Tensor, chosen: torch.Tensor, weights: torch.Tensor, gate_up: torch.Tensor,
            down: torch.Tensor, act=functools.partial(halves, silu_mul), gate_up_bias: torch.Tensor | None = None,
            down_bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [T, H], chosen [T, k] expert ids, weights [T, k], gate_up [E, 2W, H], down [E, H, W] -> [T, H]: the sum
    over each row's chosen experts of weight * (down(act(gate_up(x) + gate_up_bias)) + down_bias), in ascending
    expert order; act: [n, 2W] -> [n, W]; the biases [E, 2W] and [E, H], each expert's added to its rows."""
    rows, k = chosen.shape
    ids, slot = chosen.sort(dim=-1)                                   # [T, k]: each row's experts ascending
    w = weights.gather(1, slot).reshape(-1)                           # [T*k]
    flat = ids.reshape(-1)                                            # [T*k] pair -> expert
    order = flat.argsort(stable=True)                                 # pairs grouped by expert
    counts = torch.zeros(gate_up.shape[0], dtype=torch.int32, device=x.device).scatter_add_(
        0, flat, torch.ones_like(flat, dtype=torch.int32))
    offs = counts.cumsum(0, dtype=torch.int32)                        # [E]: where each expert's rows end
    expert = flat[order]                                              # [T*k]: each sorted pair's expert
    h = torch._grouped_mm(x[order // k], gate_up.transpose(1, 2), offs=offs)   # [T*k, 2W]
    if gate_up_bias is not None:
        h = h + gate_up_bias[expert]
    y = torch._grouped_mm(act(h), down.transpose(1, 2), offs=offs)            # [T*k, H]
    if down_bias is not None:
        y = y + down_bias[expert]
    y = (y * w[order, None]).to(x.dtype)                              # as the loop weighs an expert's rows
    back = torch.empty_like(y).index_copy_(0, order, y).view(rows, k, -1)   # [T, k, H], experts ascending
    out = torch.zeros_like(x)
    for j in range(k):   # the loop's order of additions, in x's dtype
        out = out + back[:, j]
    return out


def probe(stack, x: torch.Tensor, chosen: torch.Tensor, weights: torch.Tensor,
          want: torch.Tensor) -> None:
    """Record whether :func:`grouped` runs for ``x``'s shape and agrees with ``want`` (the loop's output)."""
    if x.device.type not in DEVICES or (key := stack.key(x, chosen.shape[1])) in VERDICTS or not stack.valid():
        return
    try:
        got = run(stack, x, chosen, weights)
    except Exception as e:  # noqa: BLE001 - a form this build or GPU does not run is simply not chosen
        VERDICTS[key] = False
        log.info("draftsmith: grouped experts %s not used: %s: %s", key[0], type(e).__name__, str(e)[:200])
        return
    err, size = (got.float() - want.float()).abs().max().item(), want.float().abs().max().item()
    VERDICTS[key] = bool(err <= TOLERANCE * size)
    log.info("draftsmith: grouped experts %s: %s (differs by %.3g, largest output %.3g)", key[0],
             "used in graphs" if VERDICTS[key] else "not used", err, size)


def taken(stack, x: torch.Tensor, top_k: int) -> bool:
    """While a graph is captured or a trace runs: whether ``stack`` (None: the experts have none) runs the grouped
    form, as a verdict (and, tracing, :func:`traceable`) allows; else every expert runs over every row."""
    if stack is None or not stack.valid():
        return False
    key = stack.key(x, top_k)
    return bool(VERDICTS.get(key)) and (not torch.compiler.is_compiling() or traceable(stack, key))


@constant_in_traces   # asked while torch.compile traces, in Python: once per trace
def traceable(stack, key: tuple) -> bool:
    """Whether :func:`grouped` runs over meta tensors of ``stack``'s shapes and strides for ``key``
    (:meth:`ExpertStack.key`: the input's dtype, top_k), the rules a trace's fake tensors follow; recorded in
    :data:`TRACEABLE`."""
    if key not in TRACEABLE:
        def meta(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
            return torch.empty_strided(t.shape, t.stride(), dtype=dtype or t.dtype, device="meta")
        args = {n: meta(t) if isinstance(t, torch.Tensor) else t for n, t in stack.grouped_args(eager=True).items()}
        (_, dtype, top_k, _), hidden = key, args["down"].shape[1]
        ids = torch.zeros(1, top_k, dtype=torch.long, device="meta")
        try:
            grouped(meta(torch.empty(1, hidden), dtype), ids, meta(ids, torch.float32), **args)
            TRACEABLE[key] = True
        except RuntimeError as e:
            TRACEABLE[key] = False
            log.info("draftsmith: grouped experts %s not traced: %s", key[0], str(e)[:200])
    return TRACEABLE[key]
