"""The ``split`` weight rule: one checkpoint tensor holding several canonical ones stacked along dim 0 (rows).

Phi-3 and some EAGLE exports store q | k | v as one ``qkv_proj`` and gate | up as one ``gate_up_proj``. A split rule
names the parts; how many rows each takes is the model's to say, so the load plan (assembler/splits.py) sizes them
from the meta model and checks the fused rows against their sum before any data is read. :class:`RuleSet
<draftsmith.components.weights.RuleSet>` asks a rule for ``parts`` where it has them; everything else about rules
(bounded regex matching, ``$1`` refused in a replacement) is shared with the regex rule in components/weights.py.
"""
from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from draftsmith.components.weights import RegexRule, SplitRefused, check_rename, dollar_problem, search, substitute
from draftsmith.errors import short

__all__ = ["RULE_KEYS", "SPLIT_PARTS", "SplitRule"]

SPLIT_PARTS = 64   # parts of one fused tensor; real ones have 2 (gate | up) or 3 (q | k | v)
_TEMPLATE_TOKEN = re.compile(r"\\(?:g<[^>]*>|\d{1,2}|.)", re.DOTALL)
_TEMPLATE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "b": "\b", "\\": "\\"}


def _output_pattern(template: str) -> str:
    """A regex searching for what ``template`` writes, a group reference standing for any text: a split rule's
    parts recognised among canonical names, without the checkpoint name they came from."""
    out, last = [], 0
    for m in _TEMPLATE_TOKEN.finditer(template):
        out.append(re.escape(template[last:m.start()]))
        token = m.group()[1:]
        # re.sub turns \n and its kin into their character and keeps any other escape, such as \., as written
        literal = _TEMPLATE_ESCAPES.get(token, "\\" + token)
        out.append(".*" if token[:2] == "g<" or token.isdigit() else re.escape(literal))
        last = m.end()
    out.append(re.escape(template[last:]))
    return "".join(out)


class SplitRule(BaseModel):
    """One checkpoint tensor holding several canonical ones stacked along dim 0 (rows), in the order of ``into``.

    Where ``re.search(match, name)`` succeeds, each part's canonical name is ``re.sub(match, part, name,
    count=1)``, as a regex rule's ``replace``: ``{kind: split, match: '^(layers\\.\\d+)\\.self_attn\\.qkv_proj\\.',
    into: ['\\1.self_attn.q_proj.', '\\1.self_attn.k_proj.', '\\1.self_attn.v_proj.']}`` reads Phi-3's q | k | v
    rows. The rule names parts only: each part's row count is the model's (the load plan sizes them from the meta
    model and refuses a fused tensor whose rows are not their sum, before any data is read).

    ``apply`` answers the first part (for callers that only need a name the tensor lands on, such as counting
    layers); :meth:`RuleSet.remap` asks ``parts`` for all of them. There is no ``inverse``: no single checkpoint
    name holds one part, so writing back would concatenate the parts, which convert does not do.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str
    into: tuple[str, ...]
    inverse: None = None   # always None (the weight_rule kind reads it): no name-by-name inverse

    @field_validator("inverse", mode="before")
    @classmethod
    def _no_inverse(cls, value: Any) -> None:
        if value is not None:
            raise ValueError("a split rule takes no inverse: no checkpoint name holds one part alone, and writing "
                             "the parts back would concatenate them, which convert does not do")
        return value

    @field_validator("match")
    @classmethod
    def _a_bounded_regex(cls, pattern: str) -> str:   # said beside into's problems (RegexRule's)
        check_rename("match", pattern)
        return pattern

    @field_validator("into")
    @classmethod
    def _parts(cls, into: tuple[str, ...]) -> tuple[str, ...]:
        if not 2 <= len(into) <= SPLIT_PARTS:
            raise ValueError(f"names {len(into)} part{'s' * (len(into) != 1)}; a split rule names 2 to {SPLIT_PARTS} "
                             "(one name is a rename: a regex rule's replace)")
        for template in into:
            if (why := dollar_problem(template)) is not None:
                raise ValueError(why)
        if len(set(into)) < len(into):
            twice = next(t for t in into if into.count(t) > 1)
            raise ValueError(f"names the part {short(twice)} twice; each part is a different canonical tensor")
        return into

    @model_validator(mode="after")
    def _check(self) -> SplitRule:   # every part that does not fit the match, in one message
        said = []
        for template in self.into:
            try:
                check_rename("match", self.match, template)
            except ValueError as e:
                said.append(str(e))
        if said:
            raise ValueError("; ".join(said))
        return self

    def parts(self, name: str) -> tuple[str, ...] | None:
        """Every part's canonical name, in row order, or None when the rule does not match."""
        if not search(self.match, name):
            return None
        return tuple(substitute(self.match, template, name) for template in self.into)

    def apply(self, name: str) -> str | None:
        """The first part's canonical name, or None when the rule does not match (see :meth:`parts`)."""
        parts = self.parts(name)
        return None if parts is None else parts[0]

    def invert(self, name: str) -> str | None:
        raise SplitRefused(f"rule {self.describe()} splits one checkpoint tensor into {len(self.into)} parts; "
                           f"no checkpoint name holds {name!r} alone (writing it back would concatenate the parts)")

    def produces(self, name: str) -> bool:
        """Whether ``name`` looks like one of the parts this rule writes (group references standing for any text)."""
        return any(search(_output_pattern(t), name) for t in self.into)

    def describe(self, index: int | None = None) -> str:
        """Human form, e.g. "rule 0: split 'qkv_proj' into 'q_proj', 'k_proj', 'v_proj'"."""
        body = f"split '{self.match}' into " + ", ".join(f"'{t}'" for t in self.into)
        return body if index is None else f"rule {index}: {body}"


# The keys each built-in rule kind is written with (the spec schema's message for a `rules` that is not a list
# lists them); a split rule's `inverse` exists only to be refused with its reason.
RULE_KEYS: dict[str, tuple[str, ...]] = {"regex": tuple(RegexRule.model_fields),
                                         "split": tuple(k for k in SplitRule.model_fields if k != "inverse")}
