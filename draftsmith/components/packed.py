"""oneDNN-prepacked weights for CPU inference (``decoding.linear: auto | packed | plain`` in a spec).

On one CPU core ``F.linear`` runs a one-token decode as a matrix-vector product and a verification of T tokens
as a matrix product that repacks the whole weight on every call, so a 17-token verify of SmolLM2 cost 2-3x a
decode. oneDNN's linear over a weight reordered once into its blocked layout (what torch.compile's CPU freezing
pass emits) reads the weight as stored: 1.2-2x faster per matmul on this project's machine at every token count
(``benchmarks/bench_packed.py`` prints the table). Nothing else changes: the module keeps its class family, its
``weight`` (training, tied embeddings, checkpoints, ``.to()``) and its name; the packed copy is a plain attribute,
rebuilt when the weight changes (its version counter) and bypassed whenever it cannot apply (CUDA, autograd,
autocast, a dtype other than the weight's), where ``nn.Linear.forward`` runs as before.

The version counter sees every change made through torch: an in-place op or ``copy_`` under ``torch.no_grad()``,
``load_state_dict``, an optimizer step, a new ``Parameter``. A write through ``weight.data`` does not bump it
(``.data`` is the tensor autograd is not told about), so the packed copy would go stale; edit weights under
``torch.no_grad()`` instead, or call :func:`forget_packed` after such a write.

A module that stores its weight otherwise opts in with a boolean ``packs`` attribute and ``prepack()`` /
``repack()`` methods built on :func:`runs_packed`, :func:`current` and :func:`matmul`: an FP8 linear
(:class:`draftsmith.components.quant.FP8Weight`) packs its dequantized weight, keyed on its stored weight and scale,
and multiplies its (fake-quantized) input by that copy instead of dequantizing every forward (the CPU has no FP8
product): 20-60x less time per FP8 linear, for a copy in the compute dtype beside the fp8 weight (what packing
costs a float linear too; ``decoding.linear: plain`` keeps neither copy).
"""
from __future__ import annotations

import functools
from typing import Callable

import torch
from torch import nn

from draftsmith.components.mixins import mixed


def available() -> bool:
    """Whether this torch build has the oneDNN ops (CPU builds with mkldnn: x86 and arm64 wheels)."""
    ops = getattr(torch.ops, "mkldnn", None)
    return (torch.backends.mkldnn.is_available() and ops is not None
            and hasattr(ops, "_reorder_linear_weight") and hasattr(ops, "_linear_pointwise"))


@functools.cache
def dtypes() -> tuple[torch.dtype, ...]:
    """The weight dtypes packed here: float32, and bfloat16 where oneDNN's bf16 path runs on this CPU (it needs
    AVX512-BW/VL/DQ or AVX-NE-CONVERT; on an AVX2-only CPU it refuses the reorder, so a bfloat16 model stays on
    ``F.linear``). oneDNN's CPU linear has no float64; float16 is not measured."""
    if not available():
        return (torch.float32,)
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(1, 1, dtype=torch.bfloat16), None)
    except RuntimeError:
        return (torch.float32,)
    return (torch.float32, torch.bfloat16)


# ``auto`` packs a weight of at least this many elements: oneDNN spends ~13 us per call on this machine, more than
# the repacking it saves on a small matrix (one core: 64x64 loses 5x, 192x576 breaks even in float32 at 8 tokens and
# gains 1.3x in bfloat16, 576x576 gains 1.3x in both)
AUTO_MIN_ELEMENTS = 1 << 16


def trains(linear: nn.Module) -> bool:
    """Whether autograd wants the gradient of ``linear``'s weight or bias (the packed op has no backward)."""
    return any(p is not None and p.requires_grad for p in (linear._parameters["weight"], linear.bias))


def runs_packed(x: torch.Tensor, dtype: torch.dtype, trained: bool, gemv: bool = True) -> bool:
    """Whether a CPU linear computing with weights of ``dtype`` takes the packed product for ``x``: not on CUDA,
    autograd or autocast, nor for a dtype oneDNN is not used for. ``gemv``: on one thread, one float32 row takes
    ``F.linear`` on the weight as stored (MKL's matrix-vector product is 5-7% faster than oneDNN's there; on two
    threads oneDNN's is 1.1-1.3x faster, and target-only decoding of the demo 1.17x: benchmarks/bench_packed.py);
    False where the stored weight is not what is multiplied (an FP8 one would be dequantized)."""
    if x.device.type != "cpu" or x.dtype != dtype or dtype not in dtypes():
        return False
    if gemv and dtype == torch.float32 and x.numel() == x.shape[-1] and torch.get_num_threads() == 1:
        return False
    if torch.is_grad_enabled() and (trained or x.requires_grad):
        return False
    return not torch.is_autocast_enabled("cpu")


def current(module: nn.Module, key: tuple, weight: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``module``'s packed copy, reordered from ``weight()`` [out, in] unless it was made for ``key``."""
    if module._packed_key != key:
        with torch.no_grad():
            module._packed = torch.ops.mkldnn._reorder_linear_weight(weight().detach(), None)
        module._packed_key = key
    return module._packed


def matmul(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    # x: [..., in] -> [..., out]
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedWeight:
    """Mixin placed in front of an ``nn.Linear`` (sub)class by :func:`pack_linears` (:func:`mixins.mixed`)."""

    PREFIX = "Packed"
    TRANSIENT = ("_packed", "_packed_key")   # left out of a copy: made again from the weight at its next call
    _packed: torch.Tensor | None = None
    _packed_key: tuple | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if not runs_packed(x, w.dtype, trains(self)):
            return super().forward(x)
        self.repack()
        return matmul(x, self._packed, self.bias)

    def repack(self) -> None:
        """Reorder the weight into oneDNN's layout unless the copy is current (same tensor, same version)."""
        w = self.weight
        current(self, (w.data_ptr(), w.dtype, w._version), lambda: w)

    def prepack(self) -> None:
        """Reorder now where the weight will be packed (CPU, a oneDNN dtype), not in the first forward."""
        if self.weight.device.type == "cpu" and self.weight.dtype in dtypes():
            self.repack()


def forget_packed(module: nn.Module) -> None:
    """Drop the packed copies under ``module``, so that each is rebuilt from its weight at its next call (after a
    write the version counter did not see, such as one through ``weight.data``)."""
    for sub in module.modules():
        if isinstance(sub, PackedWeight) or getattr(sub, "packs", False):
            sub._packed = sub._packed_key = None


def packable(module: nn.Module) -> bool:
    """A plain ``nn.Linear`` (a fusion layer calls its matmul through its own method), or a module that opts in
    with a ``packs`` flag (an FP8 linear: its dequantized weight is what is packed), that is not part of a stacked
    product (stacked.py: the stacked Linear is packed instead)."""
    opts_in = type(module) is nn.Linear or isinstance(getattr(module, "packs", None), bool)
    return opts_in and not getattr(module, "stacked_part", False)


def pack_linears(module: nn.Module, min_elements: int = 0) -> list[str]:
    """Give every packable Linear of ``module`` with at least ``min_elements`` weights (as stored) prepacked
    weights, in place; returns their names."""
    done = []
    for name, sub in module.named_modules():
        # an empty weight (a zero-width Linear) has nothing to pack, and oneDNN refuses to reorder one
        if packable(sub) and sub._parameters["weight"].numel() >= max(min_elements, 1):
            if type(sub) is nn.Linear:
                sub.__class__ = mixed(PackedWeight, nn.Linear)
            else:
                sub.packs = True
            sub.prepack()  # now, not in the first generate() call, whose timing a user reads
            done.append(name)
    return done


def is_packed(module: nn.Module) -> bool:
    """Whether :func:`pack_linears` packed ``module``."""
    return isinstance(module, PackedWeight) or getattr(module, "packs", False) is True


def wanted(setting: str, device: str) -> bool:
    """Whether to pack at all: on CPU where torch has the ops, unless ``plain`` (CUDA ignores the setting)."""
    return setting != "plain" and torch.device(device).type == "cpu" and available()


def pack_model(module: nn.Module, setting: str, device: str) -> list[str]:
    """The spec's ``decoding.linear`` applied to ``module``: ``auto`` packs the weights large enough to gain,
    ``packed`` every plain Linear, ``plain`` none."""
    if not wanted(setting, device):
        return []
    return pack_linears(module, AUTO_MIN_ELEMENTS if setting == "auto" else 0)
