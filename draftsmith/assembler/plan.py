"""The load plan: which checkpoint tensor fills which model parameter, checked before any data is read.

`plan_load` maps the checkpoint's names through the spec's rules, compares them with what the model (built on
the meta device) expects, and raises ONE `CheckpointMismatch` listing everything that does not fit: missing,
unexpected, wrongly shaped, wrongly typed and colliding names (invariant 23). A strict, complete report is the
point: loaders that warn on unmatched names load wrong layouts as garbage. Lines are grouped by pattern, so 32
layers missing one tensor read as `layers.{0..31}.mlp.up_proj.weight`, and each line says which rule produced
the name, since a wrong rule is the usual cause.

A split rule (components/split_rule.py) maps one fused tensor to several parts; their row counts are the model's
own, so the plan checks that the fused rows are the parts' rows stacked (assembler/splits.py) and records each
part's rows (`LoadPlan.rows`), which `LoadPlan.tensor` slices at load. A missing q_proj / gate_proj beside a
leftover fused qkv_proj / gate_up_proj is said to look fused, never offered the closest name of another module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from draftsmith.assembler.weight_files import FLOAT4, TensorInfo
from draftsmith.assembler.names import (Suggester, chain_note, group_names, idle_rule_note, natural, one_pattern,
                                        quote, shadowed_rule_note)
from draftsmith.assembler.splits import FusedHint, split_rows
from draftsmith.components.quant_models import loadable_shapes, row_blocks
from draftsmith.components.weights import RuleSet
from draftsmith.errors import SHOWN, DraftsmithError, short_text

__all__ = ["CheckpointMismatch", "Expected", "LoadPlan", "dtype_kind", "expected_of", "plan_load", "wrong_dtype"]


@dataclass(frozen=True)
class Expected:
    """What the model wants for one canonical name (from a meta-device state_dict). ``also``: other shapes a
    checkpoint may store it in, holding the same values (an FP8 per-tensor scale 0-d as well as [1]); the module
    reshapes them as it is filled."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    also: tuple[tuple[int, ...], ...] = ()
    row_block: int = 1   # rows of its weight one of its rows stands for: an FP8 block scale's block rows, else 1


def expected_of(source: nn.Module | Mapping[str, Tensor]) -> dict[str, Expected]:
    """Expected shapes and dtypes of the names a model loads, from the module or a (meta-device) state_dict.

    A tensor tied under several names (the same object, e.g. a tied lm_head) is expected once, under its first
    name. A module is read with ``state_dict(keep_vars=True)`` so ties are seen; a plain ``state_dict()`` holds
    detached copies, whose ties (on the meta device) cannot be told apart, so pass the module when it has any.
    Only a module says which other shapes it loads (:func:`draftsmith.components.quant_models.loadable_shapes`).
    """
    state = source.state_dict(keep_vars=True) if isinstance(source, nn.Module) else source
    also = loadable_shapes(source) if isinstance(source, nn.Module) else {}
    blocks = row_blocks(source) if isinstance(source, nn.Module) else {}
    seen: set[int] = set()
    out: dict[str, Expected] = {}
    for name, t in state.items():
        if id(t) not in seen:
            seen.add(id(t))
            out[name] = Expected(tuple(t.shape), t.dtype, tuple(also.get(name, ())), blocks.get(name, 1))
    return out


@dataclass(frozen=True)
class LoadPlan:
    sources: dict[str, str]  # canonical name -> checkpoint name
    ignored: tuple[str, ...]  # checkpoint names dropped by `ignore`
    # canonical name -> [start, stop) rows of its checkpoint tensor: a split rule's parts (a part absent here, such
    # as a per-tensor FP8 scale every part shares, takes the whole tensor)
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)

    def tensor(self, canonical: str, data: Mapping[str, Tensor]) -> Tensor:
        """The data for ``canonical`` from ``data`` (checkpoint name -> tensor, as read_tensors returns it): the
        source tensor, or the rows of it a split rule gives this part (a view, no copy)."""
        t = data[self.sources[canonical]]
        if (rows := self.rows.get(canonical)) is not None:
            t = t.narrow(0, rows[0], rows[1] - rows[0])
        return t


class CheckpointMismatch(DraftsmithError, ValueError):
    """Everything about a checkpoint that does not fit the model, as grouped lines under one header.

    All lines stay in ``problems``; the message shows the first ones (at most ``SHOWN`` lines and about
    ``SHOWN_CHARS`` characters, each line cut to ``LINE_CHARS``) and counts the rest, like SpecError.
    """

    SHOWN_CHARS = 4_000
    LINE_CHARS = 1_000

    def __init__(self, problems: list[str], *, where: str = "checkpoint", spec: str = "spec"):
        self.problems = list(problems)
        self.where, self.spec = where, spec
        n = len(self.problems)
        header = (f"{short_text(where, 300)} does not fit spec '{short_text(spec, 100)}': "
                  f"{n} problem{'' if n == 1 else 's'}")
        shown, size = [], 0
        for line in self.problems[:SHOWN]:
            line = short_text(line, self.LINE_CHARS)
            if shown and size + len(line) > self.SHOWN_CHARS:
                break
            shown.append(line)
            size += len(line)
        more = [f"... and {n - len(shown)} more"] if n > len(shown) else []
        super().__init__("\n  ".join([header, *shown, *more]))


# FP8 values stored beside their scales: a cast from a wider float (a dequantized export whose scales were left
# beside it) would be multiplied by the scales again; e8m0 (a power-of-two scale) casts exactly and stays a float
FLOAT8 = frozenset(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
                   if hasattr(torch, n))


def dtype_kind(dtype: torch.dtype) -> str:
    """'float', 'float8', 'int', 'bool', 'complex' or 'packed float4': loading may cast within a kind, never across
    kinds."""
    if dtype == FLOAT4:
        return "packed float4"  # two e2m1 values a byte, and torch has no cast from it: a kind of its own
    if dtype in FLOAT8:
        return "float8"
    if dtype == torch.bool:
        return "bool"
    if dtype.is_complex:
        return "complex"
    return "float" if dtype.is_floating_point else "int"


def wrong_dtype(got: torch.dtype, want: torch.dtype) -> str | None:
    """Why a checkpoint tensor of dtype ``got`` cannot load into a parameter of dtype ``want``, or None: loading
    casts within a kind (:func:`dtype_kind`: a float tensor into any float parameter, an int into any int, an FP8
    one into FP8), never across kinds, and one FP8 format never into another of a smaller range (e5m2 cast to e4m3fn
    clamps every value past 448 to 448: silently other weights; e4m3fnuz, whose largest is 240, fits). The one dtype
    rule of a load plan (``convert`` asks it too, before it writes a draft)."""
    if dtype_kind(got) == dtype_kind(want) == "float8" and torch.finfo(got).max > torch.finfo(want).max:
        return (f"is {_dtype(got)} in the checkpoint, the model expects {_dtype(want)}: one FP8 format is not cast "
                "into another (its values past the other's range would be clamped, not said); dequantize it, or "
                f"store it as {_dtype(want)}")
    if dtype_kind(got) == dtype_kind(want):
        return None
    return (f"is {_dtype(got)} ({dtype_kind(got)}) in the checkpoint, the model expects {_dtype(want)} "
            f"({dtype_kind(want)})")


def _shape(shape: tuple[int, ...]) -> str:
    return short_text("[" + ", ".join(map(str, shape)) + "]", 100)


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- the plan --------------------------------------------------------------------------------------------------

def plan_load(infos: Mapping[str, TensorInfo], rules: RuleSet, expected: Mapping[str, Expected], *,
              where: str = "checkpoint", spec: str = "spec", optional: Iterable[str] = (),
              unused: Iterable[str] = ()) -> LoadPlan:
    """Map checkpoint names to the model's names and check them; one CheckpointMismatch lists every problem.

    Reads only the listing (names, shapes, dtypes): no tensor data. A float tensor may load into any float
    parameter and an int tensor into any int parameter (cast at assignment); any other kind change is refused.
    Names in `optional` may be missing (e.g. an embedding some drafts do not ship); names in `unused` may be
    there and are not read (a frozen copy of a table the model takes from the target).
    """
    remap = rules.remap(infos)
    optional = set(optional)
    collided = set(remap.collisions)
    origin = {canon: src for canon, src in remap.mapping.items()}  # canonical -> (checkpoint name, rule index)

    def describe(index: int | None) -> str:
        return short_text(rules.describe(index), 300)

    def via(canons: list[str]) -> str:
        """Where a group of canonical names came from; members of a bucket share their rule."""
        index = origin[canons[0]][1]
        if index is None:
            return " " + describe(None)
        return f"; from {one_pattern(origin[c][0] for c in canons)} via {describe(index)}"

    problems: list[str] = []

    # Unexpected: checkpoint tensors whose canonical name the model does not have.
    unused = set(unused)
    unexpected = [c for c in origin if c not in expected and c not in unused]
    buckets: dict[object, list[str]] = {}
    for canon in unexpected:
        buckets.setdefault(origin[canon][1], []).append(canon)
    unexpected_lines = []
    for index, canons in buckets.items():
        for pattern, members in group_names(canons):
            if index is None:  # no rule: the checkpoint names are the canonical ones
                unexpected_lines.append((members[0], f"unexpected: {quote(pattern)} {describe(None)}"))
            else:
                ckpt = one_pattern(origin[c][0] for c in members)
                unexpected_lines.append((members[0], f"unexpected: {ckpt} -> {quote(pattern)} via {describe(index)}"))
    if len(buckets) > 1:  # one rule's lines are in order already
        unexpected_lines.sort(key=lambda x: natural(x[0]))

    # Missing: expected names nothing produced. Suggest the closest leftover (unexpected or ignored) name,
    # preferring one of the right shape: names alone are too alike (every layer has '.weight') to go by.
    missing = [n for n in expected if n not in origin and n not in collided and n not in optional]
    if missing:
        leftovers = ({c: (origin[c][0], infos[origin[c][0]].shape) for c in unexpected}
                     | {n: (f"{n} (ignored)", infos[n].shape) for n in remap.ignored})
        fused = FusedHint({c: shown for c, (shown, _) in leftovers.items()})
        placed = [n for n in expected if n in origin]   # another placed layer's leftover is no hint for a missing layer
        closest = Suggester(leftovers, placed).settle((n, expected[n].shape) for n in missing)
    # the names the rules this checkpoint's names went through would read a missing one from (midlayer.* for a
    # missing layers.0.*): what to look for in the checkpoint; none when no rule made a name
    used = remap.used_rules

    def written(members: list[str]) -> str:
        names = [c for n in members for c in rules.preimages(n, used)]
        return f" (would be read from {one_pattern(names)})" if names else ""

    # a leftover checkpoint name -> (the rule that took it, the name it made)
    taken = {origin[c][0]: (origin[c][1], c) for c in unexpected}
    buckets = {}
    for name in missing:
        buckets.setdefault(expected[name], []).append(name)
    for exp, names in buckets.items():
        for pattern, members in group_names(names):
            if found := [f for n in members if (f := fused(n)) is not None]:
                hint = f"; looks fused: {one_pattern(found)} in the checkpoint stacks its rows with others: " + (
                    _unreached_split(found, taken, rules) or "use a split rule (README: weight rules)")
            else:
                close = [c for n in members if (c := closest[n]) is not None]
                hint = f"; closest in checkpoint: {one_pattern(close)}" if close else ""
            problems.append(f"missing: {quote(pattern)} {_shape(exp.shape)} {_dtype(exp.dtype)}{written(members)}"
                            f"{hint}")
    problems.extend(line for _, line in unexpected_lines)

    # Split rules: the fused tensor's rows must be its parts' rows stacked (checked as a whole, not per part).
    rows, split_lines = split_rows(remap, infos, expected, origin, describe)
    problems.extend(split_lines)

    # Present on both sides: compare shapes, then dtype kinds.
    both = [c for c in expected if c in origin]
    shape_buckets: dict[tuple, list[str]] = {}
    dtype_buckets: dict[tuple, list[str]] = {}
    parts = {c for cs in remap.split.values() for c in cs}
    for canon in both:
        info, exp, index = infos[origin[canon][0]], expected[canon], origin[canon][1]
        if canon not in parts and info.shape != exp.shape and info.shape not in exp.also:
            shape_buckets.setdefault((info.shape, (exp.shape, *exp.also), index), []).append(canon)
        if wrong_dtype(info.dtype, exp.dtype):
            dtype_buckets.setdefault((info.dtype, exp.dtype, index), []).append(canon)
    for (got, want, _), canons in shape_buckets.items():
        wanted = " or ".join(map(_shape, want))   # the model's own shape, then any other it loads as well
        for pattern, members in group_names(canons):
            problems.append(f"wrong shape: {quote(pattern)} is {_shape(got)} in the checkpoint, the model expects "
                            f"{wanted}{via(members)}")
    for (got, want, _), canons in dtype_buckets.items():
        for pattern, members in group_names(canons):
            problems.append(f"wrong dtype: {quote(pattern)} {wrong_dtype(got, want)}{via(members)}")

    # Collisions: several checkpoint names for one canonical name (the rules are not injective here).
    for pattern, members in group_names(collided):
        by_rule: dict[int | None, list[str]] = {}
        for source in (s for c in members for s in remap.collisions[c]):
            by_rule.setdefault(rules.to_canonical(source)[1], []).append(source)
        parts = [f"{one_pattern(srcs)} " + (describe(i) if i is None else f"via {describe(i)}")
                 for i, srcs in by_rule.items()]
        shown = "; ".join(parts[:3]) + (f"; and {len(parts) - 3} more rules" if len(parts) > 3 else "")
        problems.append(f"collision: several checkpoint names map to {quote(pattern)}: {shown}")

    if problems:
        error = CheckpointMismatch(problems, where=where, spec=spec)
        # a name one rule made that the model lacks, and a later rule would make into one it has
        mapped = ((source, canon, index) for canon, (source, index) in origin.items())
        if (note := chain_note(rules, mapped, expected.__contains__)) is not None:
            error.add_note(note)
        unplaced = [origin[c][0] for c in unexpected if origin[c][1] is None]   # no rule matched, not expected
        astray = [origin[c][0] for c in unexpected if origin[c][1] is not None]  # a rule made them, not expected
        shadow, shadowed = shadowed_rule_note(rules, infos, missing) if missing else (None, set())
        if shadow is not None:
            error.add_note(shadow)
        if missing and (note := idle_rule_note(rules, infos, missing, unplaced, astray, shadowed)) is not None:
            error.add_note(note)
        raise error
    return LoadPlan(sources={c: origin[c][0] for c in both}, ignored=tuple(remap.ignored), rows=rows)


def _unreached_split(found: list[str], taken: Mapping[str, tuple[int, str]], rules: RuleSet) -> str | None:
    """What to say of fused checkpoint names a split rule of the spec would split but another rule took first (rules
    do not chain: a name takes the first rule it matches, and a rule never sees the name another made), or None where
    no split rule matches them."""
    for name in found:
        by, made = taken.get(name, (None, name))
        if by is None:   # no rule took it, so none matches it
            continue
        if (hit := rules.other_rule(name, by)) and len(hit[1]) > 1:
            return f"split rule {hit[0]} matches it, but rule {by} takes it first: put the split rule above it"
        if (hit := rules.other_rule(made, by)) and len(hit[1]) > 1:
            return (f"split rule {hit[0]} matches {quote(made)}, the name rule {by} makes of it, but a rule never sees "
                    "another's name: match the checkpoint's name")
    return None
