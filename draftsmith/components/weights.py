"""Weight-name rules: how an upstream checkpoint's tensor names become the model's own (canonical) names.

A spec lists regex rules; the first rule that matches a checkpoint name rewrites it, a name no rule matches is
kept as it is, and names matched by an `ignore` pattern are dropped. Upstream layouts are translated here so
modules are never renamed to fit one layout. The mapping must be injective (invariant 22): two checkpoint names
landing on one canonical name would make one of them silently win, so `map_names` checks every name and reports
every colliding pair. The inverse (canonical -> checkpoint) exists for simple prefix renames, which is what
conversion back to an upstream layout needs.

A ``split`` rule (components/split_rule.py) is the one rule that is not a rename: one checkpoint tensor holds
several canonical ones stacked along dim 0 (Phi-3's ``qkv_proj``, ``gate_up_proj``). :class:`RuleSet` asks a rule
for ``parts(name)`` where it has them and maps the fused name to every part; the load plan sizes the parts
(assembler/splits.py). There is no name-by-name inverse of a split, so :meth:`RuleSet.from_canonical` and
:meth:`RuleSet.map_names` (one checkpoint name per canonical name) refuse it with :class:`SplitRefused`; convert
reads a fused tensor's parts through the load plan's sizes instead (convert/unfuse.py) and writes them apart.

Patterns are user input matched against user input (tensor names), so each match is bounded and a repeat of a
repeat (``(a+)+``) is refused when the rule is validated (:mod:`draftsmith.components.patterns`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from draftsmith.components.patterns import (RegexTimeout, check_rename, dollar_problem, literal_of, pattern_problem,
                                            search, substitute, template_literal)
from draftsmith.errors import DraftsmithError, short

__all__ = ["RegexRule", "RegexTimeout", "RemapCollision", "RemapResult", "RuleSet", "SplitRefused", "check_rename",
           "dollar_problem", "pattern_problem", "search", "substitute"]


class RegexRule(BaseModel):
    """One rename: `re.sub(match, replace, name, count=1)` when `re.search(match, name)` succeeds.

    `inverse` is the (match, replace) pair for canonical -> checkpoint. It is derived for a literal prefix rename
    ('^' + an escaped literal -> a literal), the only kind that is invertible by construction; any other rule can
    state its inverse explicitly. A rule that strips a prefix (``'^model\\.' -> ''``, NeMo's) gets none: it lets a
    spec load such names too, while the layout's own names are the unprefixed ones (its inverse would prefix every
    name a layout writes).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str
    replace: str
    inverse: tuple[str, str] | None = None

    @field_validator("match")
    @classmethod
    def _a_bounded_regex(cls, pattern: str) -> str:
        # the pattern alone, so that its problem is said beside replace's (the rename check below runs only when
        # every field is valid): ``match: '(a+)+', replace: '$1'`` said the $1 alone, then the nested repeat
        check_rename("match", pattern)
        return pattern

    @field_validator("replace")
    @classmethod
    def _no_dollar(cls, template: str) -> str:
        if (why := dollar_problem(template)) is not None:
            raise ValueError(why)
        return template

    @field_validator("inverse")
    @classmethod
    def _no_dollar_back(cls, pair: tuple[str, str] | None) -> tuple[str, str] | None:
        if pair is not None and (why := dollar_problem(pair[1])) is not None:
            raise ValueError(why)
        return pair

    @model_validator(mode="after")
    def _check(self) -> RegexRule:
        pairs = {"match": (self.match, self.replace), "inverse": self.inverse}
        for what, pair in pairs.items():
            if pair is not None:
                check_rename(what, *pair)
        if self.inverse is None and self.match.startswith("^") and self.replace and "\\" not in self.replace:
            literal = literal_of(self.match[1:])
            if literal is not None:
                derived = ("^" + re.escape(self.replace), template_literal(literal))
                object.__setattr__(self, "inverse", derived)  # frozen model: set once, during validation
        return self

    def apply(self, name: str) -> str | None:
        """The rewritten name, or None when the rule does not match."""
        if not search(self.match, name):
            return None
        return substitute(self.match, self.replace, name)

    def invert(self, name: str) -> str | None:
        """The checkpoint name a canonical name came from, or None when the inverse does not match."""
        if self.inverse is None:
            raise ValueError(f"rule {self.describe()} has no inverse; state `inverse: [match, replace]` explicitly")
        pattern, template = self.inverse
        if not search(pattern, name):
            return None
        return substitute(pattern, template, name)

    def describe(self, index: int | None = None) -> str:
        """Human form, e.g. "rule 0: '^midlayer\\.' -> 'layers.0.'" (no "rule i: " without an index)."""
        body = f"'{self.match}' -> '{self.replace}'"
        return body if index is None else f"rule {index}: {body}"


def _step(rule) -> Callable[[str], Sequence[str] | None]:
    """A rule as one function of a checkpoint name: its parts (a split rule), its renamed name as a 1-tuple, or
    None where it does not match."""
    parts = getattr(rule, "parts", None)
    if callable(parts):
        return parts
    return lambda name: None if (renamed := rule.apply(name)) is None else (renamed,)


class SplitRefused(DraftsmithError, ValueError):
    """A caller that needs one checkpoint name per canonical name (convert, export) met a split rule."""


class RemapCollision(DraftsmithError, ValueError):
    """Several checkpoint names map to one canonical name. `pairs` holds (name_a, name_b, canonical) for every pair."""

    def __init__(self, pairs: Sequence[tuple[str, str, str]], rules: RuleSet | None = None):
        self.pairs = list(pairs)
        lines = [f"{len(self.pairs)} pair(s) of checkpoint names map to the same canonical name:"]
        for a, b, canonical in self.pairs:
            why = ""
            if rules is not None:
                why = f" ({rules.describe_origin(a)}; {rules.describe_origin(b)})"
            lines.append(f"  {a!r} and {b!r} both map to {canonical!r}{why}")
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class RemapResult:
    """Everything `RuleSet.remap` learned, so a caller can report all problems at once instead of the first."""

    mapping: dict[str, tuple[str, int | None]]  # canonical -> (checkpoint name, rule index); collided names left out
    ignored: tuple[str, ...]
    collisions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # canonical -> all its checkpoint names
    # checkpoint name -> its parts' canonical names in row order, for each tensor a split rule splits (its parts
    # are in `mapping` too, each with the fused name as its source)
    split: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def used_rules(self) -> set[int]:
        """The rules that made a name of the listing (what :meth:`RuleSet.preimages` reads a missing name through)."""
        return {index for _, index in self.mapping.values() if index is not None}

    @property
    def pairs(self) -> list[tuple[str, str, str]]:
        return [(a, b, c) for c, names in self.collisions.items() for a, b in itertools.combinations(names, 2)]


class RuleSet:
    """An ordered list of rules plus `ignore` patterns (searched on the checkpoint name before any rule)."""

    def __init__(self, rules: Sequence[RegexRule] = (), ignore: Sequence[str] = (),
                 where: Callable[[], Mapping[int, str]] | None = None):
        self.rules = tuple(rules)
        self.ignore = tuple(ignore)
        # rule index -> where the spec writes it ('line 12'), asked once and only when a rule is described: a load
        # problem names a rule where validation names its line (a RuleSet not read from a spec file has none)
        self._where, self._written = where, None
        # each rule's mapping, looked up once: a split rule (SplitRule, or a plugin's rule with parts()) answers
        # every part, any other rule one renamed name (a pydantic model's missing attribute costs ~6 us a name)
        self._steps = tuple(_step(rule) for rule in self.rules)
        self._seen: dict[str, tuple[tuple[str, ...] | None, int | None]] = {}  # name -> to_parts(name); rules are fixed
        for pattern in self.ignore:
            if (why := pattern_problem(pattern)) is not None:
                raise ValueError(f"ignore pattern {short(pattern)} is not a valid regex: {why}")

    def __repr__(self) -> str:
        return f"RuleSet(rules={list(self.rules)!r}, ignore={list(self.ignore)!r})"

    def is_ignored(self, name: str) -> bool:
        return any(search(p, name) for p in self.ignore)

    def to_canonical(self, name: str) -> tuple[str | None, int | None]:
        """(canonical name, index of the rule used): (None, None) if ignored, (name, None) if no rule matches. A
        tensor a split rule splits answers its first part (:meth:`to_parts` answers all)."""
        parts, index = self.to_parts(name)
        return (None if parts is None else parts[0]), index

    def to_parts(self, name: str) -> tuple[tuple[str, ...] | None, int | None]:
        """(canonical names, index of the rule used): one name for a rename, every part for a split rule, None if
        ignored; ((name,), None) if no rule matches.

        Remembered per name: assembling maps a listing twice (the draft's layer count, then the load plan), and a
        listing may hold 10^5 names."""
        if (seen := self._seen.get(name)) is None:
            seen = self._seen[name] = self._map(name)
        return seen

    def _map(self, name: str) -> tuple[tuple[str, ...] | None, int | None]:
        if self.is_ignored(name):
            return None, None
        for i, step in enumerate(self._steps):
            if (out := step(name)) is not None:
                return tuple(out), i
        return (name,), None

    def later_rule(self, name: str, after: int) -> tuple[int, tuple[str, ...]] | None:
        """(index, names) of the first rule past ``after`` that would map ``name``: rules do not chain, so this is
        what a user who wrote them as steps expected of a name an earlier rule made."""
        return self._first(name, range(after + 1, len(self._steps)))

    def other_rule(self, name: str, made_by: int) -> tuple[int, tuple[str, ...]] | None:
        """:meth:`later_rule`, else the first earlier rule than ``made_by`` that would map ``name``: a split rule
        written for the name a rename makes (``layers.0.mlp.gate_up_proj``, not the checkpoint's ``midlayer.*``)
        never sees it, wherever it stands."""
        return self.later_rule(name, made_by) or self._first(name, range(made_by))

    def maps(self, index: int, name: str) -> tuple[str, ...] | None:
        """What rule ``index`` alone makes of ``name`` (a split rule's parts, a rename's name), None where its match
        is not found in it (whatever rule the name takes)."""
        return None if (out := self._steps[index](name)) is None else tuple(out)

    def _first(self, name: str, indices: Iterable[int]) -> tuple[int, tuple[str, ...]] | None:
        return next(((i, out) for i in indices if (out := self.maps(i, name)) is not None), None)

    def from_canonical(self, name: str) -> str:
        """The checkpoint name for a canonical one: the first rule whose inverse matches, else the name itself.

        A candidate counts only if it maps forward to the same name through the same rule, so the answer is a
        true preimage. Rules without an inverse are skipped; ValueError when no preimage can be found. A
        checkpoint name that passed through unchanged but looks like a rule's output (e.g. 'layers.0.x' beside
        the rule midlayer. -> layers.0.) goes back through that rule: that is what converting to a layout means.
        """
        for i, rule in enumerate(self.rules):
            if callable(produces := getattr(rule, "produces", None)) and produces(name):
                raise SplitRefused(f"canonical {name!r} is one part of a fused tensor under {rule.describe(i)}: "
                                   "writing it back would concatenate the parts, which convert and export do not "
                                   "do; write to a layout without split rules")
        for i, rule in enumerate(self.rules):
            if rule.inverse is None:
                continue
            candidate = rule.invert(name)
            if candidate is not None and self.to_canonical(candidate) == (name, i):
                return candidate
        if self.to_canonical(name) == (name, None):
            return name
        opaque = [r.describe(i) for i, r in enumerate(self.rules) if r.inverse is None]
        hint = f"; rules without an inverse: {', '.join(opaque)}" if opaque else ""
        raise ValueError(f"no checkpoint name maps to canonical {name!r}{hint}")

    def preimages(self, name: str, indices: Iterable[int]) -> list[str]:
        """The checkpoint names that rules ``indices`` map to canonical ``name`` (true preimages, as
        :meth:`from_canonical` checks them), in rule order; rules without an inverse give none."""
        found = ((i, self.rules[i].invert(name)) for i in sorted(indices) if self.rules[i].inverse is not None)
        return [c for i, c in found if c is not None and self.to_canonical(c) == (name, i)]

    def describe(self, index: int | None) -> str:
        """"rule i (line N): 'm' -> 'r'" (no line where the spec's text does not say it), or the identity's wording
        when no rule produced the name."""
        if index is None:
            return "(no rule matched; name kept)"
        said = self.rules[index].describe(index)
        if self._written is None:
            self._written = dict(self._where()) if self._where is not None else {}
        if not (at := self._written.get(index)):
            return said
        head = f"rule {index}:"   # a plugin rule's own wording may not start with it: then the place goes last
        return f"rule {index} ({at}):{said[len(head):]}" if said.startswith(head) else f"{said} (rule {index}, {at})"

    def describe_origin(self, checkpoint_name: str) -> str:
        """"'name' via rule i: ..." or "'name' (no rule matched; name kept)"."""
        _, index = self.to_canonical(checkpoint_name)
        how = self.describe(index)
        return f"{checkpoint_name!r} {how}" if index is None else f"{checkpoint_name!r} via {how}"

    def remap(self, names: Iterable[str]) -> RemapResult:
        """Map every name; collect collisions instead of raising (the load planner reports them with the rest)."""
        produced: dict[str, list[tuple[str, int | None]]] = {}
        ignored, split = [], {}
        for name in names:
            parts, index = self.to_parts(name)
            if parts is None:
                ignored.append(name)
                continue
            if len(parts) > 1:
                split[name] = parts
            for canonical in parts:
                produced.setdefault(canonical, []).append((name, index))
        mapping = {c: srcs[0] for c, srcs in produced.items() if len(srcs) == 1}
        collisions = {c: tuple(sorted(n for n, _ in srcs)) for c, srcs in produced.items() if len(srcs) > 1}
        return RemapResult(mapping, tuple(ignored), collisions, split)

    def map_names(self, names: Iterable[str]) -> dict[str, tuple[str, int | None]]:
        """canonical -> (checkpoint name, rule index), one checkpoint name holding one canonical tensor (what
        convert reads by); RemapCollision lists every colliding pair, SplitRefused names a tensor a split rule
        splits (its parts are rows of it, which only a load plan sizes: assembler/plan.py)."""
        result = self.remap(names)
        if result.collisions:
            raise RemapCollision(result.pairs, self)
        if result.split:
            name, parts = next(iter(result.split.items()))
            raise SplitRefused(f"{name!r} is split into {', '.join(map(repr, parts))} by "
                               f"{self.describe(self.to_parts(name)[1])}"
                               f"{f' (and {len(result.split) - 1} more tensors)' if len(result.split) > 1 else ''}: "
                               "convert copies one checkpoint tensor per canonical tensor and does not split fused "
                               "ones; load the draft with assemble() and its spec instead")
        return result.mapping
