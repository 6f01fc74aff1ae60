"""The load plan's part for split weight rules (components/split_rule.py), and its hint for a fused tensor.

A split rule maps one fused checkpoint tensor to several canonical parts. Their row counts are the model's own, so
:func:`split_rows` checks, from the listing and the meta model alone, that the fused rows are the parts' rows
stacked (the other dims equal), and answers each part's rows for `LoadPlan.rows`; FP8 scales split alike where
they are row-wise. :class:`FusedHint` tells a missing q_proj / gate_proj that a leftover qkv_proj / gate_up_proj
holds it, so the plan proposes a split rule rather than the closest name of another module.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Protocol

from draftsmith.assembler.checkpoint import TensorInfo
from draftsmith.assembler.names import group_names, one_pattern, quote
from draftsmith.components.weights import RemapResult
from draftsmith.errors import short_text

__all__ = ["FUSED_MODULES", "FusedHint", "split_rows"]


class Expected(Protocol):
    """What the model wants for a canonical name (assembler.plan.Expected)."""
    shape: tuple[int, ...]
    also: tuple[tuple[int, ...], ...]
    row_block: int


def _shape(shape: tuple[int, ...]) -> str:
    return short_text("[" + ", ".join(map(str, shape)) + "]", 100)


# ---- split rules -----------------------------------------------------------------------------------------------

def _stacked(shape: tuple[int, ...], want: list[Expected]) -> str | None:
    """Why a tensor of ``shape`` is not the parts ``want`` stacked along dim 0 ('' for a plain misfit), or None."""
    if not shape or any(len(e.shape) != len(shape) or e.shape[1:] != shape[1:] for e in want):
        return ""
    if sum(e.shape[0] for e in want) != shape[0]:
        return ""
    return None


def _shared_scale(shape: tuple[int, ...], want: list[Expected]) -> bool:
    """A per-tensor FP8 scale ([1], or 0-d) of the fused weight: one number that scales every part's rows alike."""
    return shape in ((1,), ()) and all(e.shape == (1,) and () in e.also for e in want)


def _straddled(parts: tuple[str, ...], want: list[Expected], expected: Mapping[str, Expected]) -> str | None:
    """Why FP8 block scales cannot be cut between these parts (a part but the last scales rows that end inside a
    block, so one block of the fused scale covers two parts), or None."""
    for i, (canon, exp) in enumerate(zip(parts[:-1], want[:-1])):
        if exp.row_block > 1:
            weight = expected.get(canon.rpartition(".")[0] + ".weight")
            if weight is None or not weight.shape or weight.shape[0] % exp.row_block:
                scaled = "rows of a weight the model lacks" if weight is None else f"{weight.shape[0]} rows"
                return (f"it holds one FP8 scale per {exp.row_block} rows and part {i + 1} scales {scaled}, so a "
                        "block would straddle two parts and no part's scale can state it (dequantize it, or store "
                        "the parts apart)")
    return None


def split_rows(remap: RemapResult, infos: Mapping[str, TensorInfo], expected: Mapping[str, Expected],
                origin: Mapping[str, tuple[str, int | None]],
                describe: Callable[[int | None], str]) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """(canonical -> [start, stop) rows of its fused tensor, problem lines) for every tensor a split rule splits.

    The parts' row counts are the model's (``expected``): the fused tensor must hold their sum with the same
    other dims. A per-tensor FP8 scale is shared by every part whole; an FP8 block scale is cut only between whole
    blocks (each part but the last scales a multiple of the block's rows), else no part's scale could state it."""
    rows: dict[str, tuple[int, int]] = {}
    misfits: dict[tuple, list[str]] = {}   # (fused shape, parts' shapes, rule index, why) -> fused names
    for src, parts in remap.split.items():
        if not all(origin.get(c, (None,))[0] == src and c in expected for c in parts):
            continue   # a part collided or is unexpected: reported with those
        shape, want = infos[src].shape, [expected[c] for c in parts]
        if _shared_scale(shape, want):
            continue   # no rows: each part takes the whole tensor
        why = _straddled(parts, want, expected)
        why = _stacked(shape, want) if why is None else why
        if why is None:
            start = 0
            for canon, exp in zip(parts, want):
                rows[canon] = (start, start + exp.shape[0])
                start += exp.shape[0]
        else:
            misfits.setdefault((shape, tuple(e.shape for e in want), origin[parts[0]][1], why), []).append(src)
    lines = []
    for (shape, wanted, index, why), srcs in misfits.items():
        for pattern, members in group_names(srcs):
            named = [f"{one_pattern(remap.split[s][i] for s in members)} {_shape(w)}" for i, w in enumerate(wanted)]
            if why:
                lines.append(f"cannot split: fused {quote(pattern)} {_shape(shape)} into {' + '.join(named)}: {why}; "
                             f"via {describe(index)}")
                continue
            rest = {w[1:] for w in wanted}
            need = (f"their rows stacked, {_shape((sum(w[0] for w in wanted), *next(iter(rest))))}" if len(rest) == 1
                    and all(wanted) else "their rows stacked, which no tensor is (the parts differ past dim 0)")
            lines.append(f"wrong shape: fused {quote(pattern)} is {_shape(shape)} in the checkpoint; it is split into "
                         f"{' + '.join(named)}, so it must be {need}; via {describe(index)}")
    return rows, lines


# ---- hints -----------------------------------------------------------------------------------------------------

# Modules that checkpoints often store fused (rows stacked), and the names the fused module goes by (Phi-3,
# GPT-NeoX, GPT-2, Baichuan, Mistral's w13, MoE exports). A missing part beside such a leftover needs a split rule,
# not the closest name of the same shape, which may be another module's (gate_proj's was attn.qkv_proj).
FUSED_MODULES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("q_proj", "k_proj", "v_proj"),
                    ("qkv_proj", "qkv", "wqkv", "Wqkv", "query_key_value", "c_attn", "W_pack")),
    **dict.fromkeys(("gate_proj", "up_proj"), ("gate_up_proj", "gate_up", "w13", "w1_w3", "gate_up_fused_proj")),
}
_FUSED_TOKENS = frozenset(t for ts in FUSED_MODULES.values() for t in ts)
_DIGITS = re.compile(r"\d+")


class FusedHint:
    """fused(name): the leftover checkpoint name that looks like ``name``'s fused module (same last part, e.g.
    'weight', and preferably the same numbers: the same layer), or None. One pass over the leftovers."""

    NAME_CHARS = 300

    def __init__(self, leftovers: Mapping[str, str]):   # canonical -> as shown
        self.index: dict[tuple[str, str], dict[tuple[str, ...], str]] = {}
        for canon, shown in leftovers.items():
            if len(canon) > self.NAME_CHARS:
                continue
            tokens = canon.split(".")
            if (token := next((t for t in tokens if t in _FUSED_TOKENS), None)) is not None:
                same = self.index.setdefault((token, tokens[-1]), {})
                same.setdefault(tuple(_DIGITS.findall(canon)), shown)

    def __call__(self, name: str) -> str | None:
        if not self.index or len(name) > self.NAME_CHARS:
            return None
        tokens = name.split(".")
        module = next((t for t in tokens if t in FUSED_MODULES), None)
        for token in FUSED_MODULES.get(module, ()):
            if same := self.index.get((token, tokens[-1])):
                return same.get(tuple(_DIGITS.findall(name))) or next(iter(same.values()))
        return None
