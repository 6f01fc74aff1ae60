"""Weight-name rules: how an upstream checkpoint's tensor names become the model's own (canonical) names.

A spec lists regex rules; the first rule that matches a checkpoint name rewrites it, a name no rule matches is
kept as it is, and names matched by an `ignore` pattern are dropped. Upstream layouts are translated here so
modules are never renamed to fit one layout. The mapping must be injective (invariant 22): two checkpoint names
landing on one canonical name would make one of them silently win, so `map_names` checks every name and reports
every colliding pair. The inverse (canonical -> checkpoint) exists for simple prefix renames, which is what
conversion back to an upstream layout needs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = ["RegexRule", "RemapCollision", "RemapResult", "RuleSet"]

_SPECIAL = set(".^$*+?{}[]|()")


def _literal_of(pattern: str) -> str | None:
    """The literal string a regex matches, if it is only literals and escaped punctuation; else None."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1].isalnum():
                return None  # \d, \1, \b ... are classes or references, not literals
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch in _SPECIAL:
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def _template_literal(text: str) -> str:
    """Escape a literal string for use as an `re.sub` replacement template."""
    return text.replace("\\", "\\\\")


class RegexRule(BaseModel):
    """One rename: `re.sub(match, replace, name, count=1)` when `re.search(match, name)` succeeds.

    `inverse` is the (match, replace) pair for canonical -> checkpoint. It is derived for a literal prefix rename
    ('^' + an escaped literal -> a literal), the only kind that is invertible by construction; any other rule can
    state its inverse explicitly.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str
    replace: str
    inverse: tuple[str, str] | None = None

    @model_validator(mode="after")
    def _check(self) -> RegexRule:
        pairs = {"match": (self.match, self.replace), "inverse": self.inverse}
        for what, pair in pairs.items():
            if pair is None:
                continue
            pattern, template = pair
            try:
                # Compiles the pattern and the template; a bad group reference fails even without a match.
                re.compile(pattern).sub(template, "")
            except re.error as exc:
                raise ValueError(f"rule {what} {pattern!r} -> {template!r} is not a valid regex rename: {exc}") from exc
        if self.inverse is None and self.match.startswith("^") and "\\" not in self.replace:
            literal = _literal_of(self.match[1:])
            if literal is not None:
                derived = ("^" + re.escape(self.replace), _template_literal(literal))
                object.__setattr__(self, "inverse", derived)  # frozen model: set once, during validation
        return self

    def apply(self, name: str) -> str | None:
        """The rewritten name, or None when the rule does not match."""
        if re.search(self.match, name) is None:
            return None
        return re.sub(self.match, self.replace, name, count=1)

    def invert(self, name: str) -> str | None:
        """The checkpoint name a canonical name came from, or None when the inverse does not match."""
        if self.inverse is None:
            raise ValueError(f"rule {self.describe()} has no inverse; state `inverse: [match, replace]` explicitly")
        pattern, template = self.inverse
        if re.search(pattern, name) is None:
            return None
        return re.sub(pattern, template, name, count=1)

    def describe(self, index: int | None = None) -> str:
        """Human form, e.g. "rule 0: '^midlayer\\.' -> 'layers.0.'" (no "rule i: " without an index)."""
        body = f"'{self.match}' -> '{self.replace}'"
        return body if index is None else f"rule {index}: {body}"


class RemapCollision(ValueError):
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

    @property
    def pairs(self) -> list[tuple[str, str, str]]:
        return [(a, b, c) for c, names in self.collisions.items() for a, b in itertools.combinations(names, 2)]


class RuleSet:
    """An ordered list of rules plus `ignore` patterns (searched on the checkpoint name before any rule)."""

    def __init__(self, rules: Sequence[RegexRule] = (), ignore: Sequence[str] = ()):
        self.rules = tuple(rules)
        self.ignore = tuple(ignore)
        for pattern in self.ignore:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"ignore pattern {pattern!r} is not a valid regex: {exc}") from exc

    def __repr__(self) -> str:
        return f"RuleSet(rules={list(self.rules)!r}, ignore={list(self.ignore)!r})"

    def is_ignored(self, name: str) -> bool:
        return any(re.search(p, name) for p in self.ignore)

    def to_canonical(self, name: str) -> tuple[str | None, int | None]:
        """(canonical name, index of the rule used): (None, None) if ignored, (name, None) if no rule matches."""
        if self.is_ignored(name):
            return None, None
        for i, rule in enumerate(self.rules):
            out = rule.apply(name)
            if out is not None:
                return out, i
        return name, None

    def from_canonical(self, name: str) -> str:
        """The checkpoint name for a canonical one: the first rule whose inverse matches, else the name itself.

        A candidate counts only if it maps forward to the same name through the same rule, so the answer is a
        true preimage. Rules without an inverse are skipped; ValueError when no preimage can be found. A
        checkpoint name that passed through unchanged but looks like a rule's output (e.g. 'layers.0.x' beside
        the rule midlayer. -> layers.0.) goes back through that rule: that is what converting to a layout means.
        """
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

    def describe(self, index: int | None) -> str:
        """"rule i: 'm' -> 'r'", or the identity's wording when no rule produced the name."""
        return "(no rule matched; name kept)" if index is None else self.rules[index].describe(index)

    def describe_origin(self, checkpoint_name: str) -> str:
        """"'name' via rule i: ..." or "'name' (no rule matched; name kept)"."""
        _, index = self.to_canonical(checkpoint_name)
        how = self.describe(index)
        return f"{checkpoint_name!r} {how}" if index is None else f"{checkpoint_name!r} via {how}"

    def remap(self, names: Iterable[str]) -> RemapResult:
        """Map every name; collect collisions instead of raising (the load planner reports them with the rest)."""
        produced: dict[str, list[tuple[str, int | None]]] = {}
        ignored = []
        for name in names:
            canonical, index = self.to_canonical(name)
            if canonical is None:
                ignored.append(name)
            else:
                produced.setdefault(canonical, []).append((name, index))
        mapping = {c: srcs[0] for c, srcs in produced.items() if len(srcs) == 1}
        collisions = {c: tuple(sorted(n for n, _ in srcs)) for c, srcs in produced.items() if len(srcs) > 1}
        return RemapResult(mapping, tuple(ignored), collisions)

    def map_names(self, names: Iterable[str]) -> dict[str, tuple[str, int | None]]:
        """canonical -> (checkpoint name, rule index); RemapCollision lists every colliding pair."""
        result = self.remap(names)
        if result.collisions:
            raise RemapCollision(result.pairs, self)
        return result.mapping
