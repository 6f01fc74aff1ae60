"""The load plan: which checkpoint tensor fills which model parameter, checked before any data is read.

`plan_load` maps the checkpoint's names through the spec's rules, compares them with what the model (built on
the meta device) expects, and raises ONE `CheckpointMismatch` listing everything that does not fit: missing,
unexpected, wrongly shaped, wrongly typed and colliding names (invariant 23). A strict, complete report is the
point: loaders that warn on unmatched names load wrong layouts as garbage. Lines are grouped by pattern, so 32
layers missing one tensor read as `layers.{0..31}.mlp.up_proj.weight`, and each line says which rule produced
the name, since a wrong rule is the usual cause.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from draftsmith.assembler.checkpoint import FLOAT4, TensorInfo
from draftsmith.components.weights import RuleSet
from draftsmith.errors import DraftsmithError

__all__ = ["CheckpointMismatch", "Expected", "LoadPlan", "dtype_kind", "expected_of", "group_names", "plan_load"]


@dataclass(frozen=True)
class Expected:
    """What the model wants for one canonical name (from a meta-device state_dict)."""

    shape: tuple[int, ...]
    dtype: torch.dtype


def expected_of(source: nn.Module | Mapping[str, Tensor]) -> dict[str, Expected]:
    """Expected shapes and dtypes of the names a model loads, from the module or a (meta-device) state_dict.

    A tensor tied under several names (the same object, e.g. a tied lm_head) is expected once, under its first
    name. A module is read with ``state_dict(keep_vars=True)`` so ties are seen; a plain ``state_dict()`` holds
    detached copies, whose ties (on the meta device) cannot be told apart, so pass the module when it has any.
    """
    state = source.state_dict(keep_vars=True) if isinstance(source, nn.Module) else source
    seen: set[int] = set()
    out: dict[str, Expected] = {}
    for name, t in state.items():
        if id(t) not in seen:
            seen.add(id(t))
            out[name] = Expected(tuple(t.shape), t.dtype)
    return out


@dataclass(frozen=True)
class LoadPlan:
    sources: dict[str, str]  # canonical name -> checkpoint name
    ignored: tuple[str, ...]  # checkpoint names dropped by `ignore`


class CheckpointMismatch(DraftsmithError, ValueError):
    """Everything about a checkpoint that does not fit the model, as grouped lines under one header."""

    def __init__(self, problems: list[str], *, where: str = "checkpoint", spec: str = "spec"):
        self.problems = list(problems)
        self.where, self.spec = where, spec
        n = len(self.problems)
        header = f"{where} does not fit spec '{spec}': {n} problem{'' if n == 1 else 's'}"
        super().__init__("\n  ".join([header, *self.problems]))


def dtype_kind(dtype: torch.dtype) -> str:
    """'float', 'int', 'bool', 'complex' or 'packed float4': loading may cast within a kind, never across kinds."""
    if dtype == FLOAT4:
        return "packed float4"  # two e2m1 values a byte, and torch has no cast from it: a kind of its own
    if dtype == torch.bool:
        return "bool"
    if dtype.is_complex:
        return "complex"
    return "float" if dtype.is_floating_point else "int"


# ---- grouping names by their numeric fields --------------------------------------------------------------------

_DIGITS = re.compile(r"(\d+)")


def _natural(name: str) -> tuple:
    return tuple((0, int(p), p) if i % 2 else (1, 0, p) for i, p in enumerate(_DIGITS.split(name)))


def _render_numbers(values: frozenset[str]) -> str:
    if len(values) == 1:
        return next(iter(values))
    if not all(str(int(v)) == v for v in values):  # leading zeros: keep the strings as they are
        return "{" + ",".join(sorted(values)) + "}"
    nums, runs = sorted(int(v) for v in values), []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(f"{start}..{prev}" if prev - start >= 2 else ",".join(str(k) for k in range(start, prev + 1)))
        if n is not None:
            start = prev = n
    return "{" + ",".join(runs) + "}"


def group_names(names: Iterable[str]) -> list[tuple[str, list[str]]]:
    """Group names that differ only in their digit runs: [(pattern, members)], patterns exact.

    Each group is a product of number sets, one per digit field, and merges only groups that agree on every
    other field, so `layers.{0,1}.experts.{0,1}.w` is printed only when all four names are present.
    """
    groups: dict[tuple, list[str]] = {}
    for name in sorted(set(names), key=_natural):
        key = tuple(frozenset([p]) if i % 2 else p for i, p in enumerate(_DIGITS.split(name)))
        groups[key] = [name]
    changed = True
    while changed:
        changed = False
        for j in range(1, max((len(k) for k in groups), default=0), 2):
            buckets: dict[tuple, list[tuple]] = {}
            for key in groups:
                if len(key) > j:
                    buckets.setdefault((len(key), key[:j], key[j + 1:]), []).append(key)
            for keys in buckets.values():
                if len(keys) > 1:
                    merged = keys[0][:j] + (frozenset().union(*(k[j] for k in keys)),) + keys[0][j + 1:]
                    members = [n for k in keys for n in groups.pop(k)]
                    groups[merged] = sorted(members, key=_natural)
                    changed = True
    out = [("".join(_render_numbers(p) if i % 2 else p for i, p in enumerate(k)), m) for k, m in groups.items()]
    return sorted(out, key=lambda pm: _natural(pm[1][0]))


def _one_pattern(names: Iterable[str]) -> str:
    """A compact form of names: one pattern, or the first patterns and a count."""
    patterns = [p for p, _ in group_names(names)]
    shown = ", ".join(f"'{p}'" for p in patterns[:2])
    return shown + (f" and {len(patterns) - 2} more" if len(patterns) > 2 else "")


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- the plan --------------------------------------------------------------------------------------------------

def plan_load(infos: Mapping[str, TensorInfo], rules: RuleSet, expected: Mapping[str, Expected], *,
              where: str = "checkpoint", spec: str = "spec", optional: Iterable[str] = ()) -> LoadPlan:
    """Map checkpoint names to the model's names and check them; one CheckpointMismatch lists every problem.

    Reads only the listing (names, shapes, dtypes): no tensor data. A float tensor may load into any float
    parameter and an int tensor into any int parameter (cast at assignment); any other kind change is refused.
    Names in `optional` may be missing (e.g. an embedding some drafts do not ship).
    """
    remap = rules.remap(infos)
    optional = set(optional)
    collided = set(remap.collisions)
    origin = {canon: src for canon, src in remap.mapping.items()}  # canonical -> (checkpoint name, rule index)

    def via(canons: list[str]) -> str:
        """Where a group of canonical names came from; members of a bucket share their rule."""
        index = origin[canons[0]][1]
        if index is None:
            return " " + rules.describe(None)
        return f"; from {_one_pattern(origin[c][0] for c in canons)} via {rules.describe(index)}"

    problems: list[str] = []

    # Unexpected: checkpoint tensors whose canonical name the model does not have.
    unexpected = [c for c in origin if c not in expected]
    buckets: dict[object, list[str]] = {}
    for canon in unexpected:
        buckets.setdefault(origin[canon][1], []).append(canon)
    unexpected_lines = []
    for index, canons in buckets.items():
        for _, members in group_names(canons):
            ckpt = _one_pattern(origin[c][0] for c in members)
            if index is None:
                unexpected_lines.append((members[0], f"unexpected: {ckpt} {rules.describe(None)}"))
            else:
                unexpected_lines.append(
                    (members[0], f"unexpected: {ckpt} -> {_one_pattern(members)} via {rules.describe(index)}"))

    # Missing: expected names nothing produced. Suggest the closest leftover (unexpected or ignored) name,
    # preferring one of the right shape: names alone are too alike (every layer has '.weight') to go by.
    leftovers = {c: (origin[c][0], infos[origin[c][0]].shape) for c in unexpected}
    leftovers |= {n: (f"{n} (ignored)", infos[n].shape) for n in remap.ignored}

    def closest(name: str, shape: tuple[int, ...]) -> str | None:
        same = [c for c, (_, s) in leftovers.items() if s == shape]
        found = difflib.get_close_matches(name, same, n=1, cutoff=0.5) or difflib.get_close_matches(
            name, list(leftovers), n=1, cutoff=0.75)
        return leftovers[found[0]][0] if found else None

    missing = [n for n in expected if n not in origin and n not in collided and n not in optional]
    buckets = {}
    for name in missing:
        buckets.setdefault(expected[name], []).append(name)
    for exp, names in buckets.items():
        for pattern, members in group_names(names):
            close = [c for n in members if (c := closest(n, exp.shape)) is not None]
            hint = f"; closest in checkpoint: {_one_pattern(close)}" if close else ""
            problems.append(f"missing: '{pattern}' {_shape(exp.shape)} {_dtype(exp.dtype)}{hint}")
    problems.extend(line for _, line in sorted(unexpected_lines, key=lambda x: _natural(x[0])))

    # Present on both sides: compare shapes, then dtype kinds.
    both = [c for c in expected if c in origin]
    shape_buckets: dict[tuple, list[str]] = {}
    dtype_buckets: dict[tuple, list[str]] = {}
    for canon in both:
        info, exp, index = infos[origin[canon][0]], expected[canon], origin[canon][1]
        if info.shape != exp.shape:
            shape_buckets.setdefault((info.shape, exp.shape, index), []).append(canon)
        if dtype_kind(info.dtype) != dtype_kind(exp.dtype):
            dtype_buckets.setdefault((info.dtype, exp.dtype, index), []).append(canon)
    for (got, want, _), canons in shape_buckets.items():
        for pattern, members in group_names(canons):
            problems.append(f"wrong shape: '{pattern}' is {_shape(got)} in the checkpoint, the model expects "
                            f"{_shape(want)}{via(members)}")
    for (got, want, _), canons in dtype_buckets.items():
        for pattern, members in group_names(canons):
            problems.append(f"wrong dtype: '{pattern}' is {_dtype(got)} ({dtype_kind(got)}) in the checkpoint, the "
                            f"model expects {_dtype(want)} ({dtype_kind(want)}){via(members)}")

    # Collisions: several checkpoint names for one canonical name (the rules are not injective here).
    for pattern, members in group_names(collided):
        by_rule: dict[int | None, list[str]] = {}
        for source in (s for c in members for s in remap.collisions[c]):
            by_rule.setdefault(rules.to_canonical(source)[1], []).append(source)
        parts = [f"{_one_pattern(srcs)} " + (rules.describe(i) if i is None else f"via {rules.describe(i)}")
                 for i, srcs in by_rule.items()]
        problems.append(f"collision: several checkpoint names map to '{pattern}': {'; '.join(parts)}")

    if problems:
        raise CheckpointMismatch(problems, where=where, spec=spec)
    return LoadPlan(sources={c: origin[c][0] for c in both}, ignored=tuple(remap.ignored))
