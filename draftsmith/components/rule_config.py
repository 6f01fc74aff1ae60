"""``${key}`` placeholders in weight rules and ignore patterns, filled from the draft checkpoint's config.json.

Some layouts name tensors by a config value: DeepSeek-V3's MTP layer lives under ``model.layers.{L}.`` of the
target's own files, L = ``num_hidden_layers``. A spec writes ``'^model\\.layers\\.${num_hidden_layers}\\.'`` and
the assembler binds it to the checkpoint's value before mapping names (the value is regex-escaped in patterns
and literal in replacements). A placeholder whose key the config lacks (or holds as null / a non-scalar) is an
error naming the key, never a pattern that silently matches nothing.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from draftsmith.components.split_rule import SplitRule
from draftsmith.components.patterns import PLACEHOLDER
from draftsmith.components.weights import RegexRule, pattern_problem
from draftsmith.errors import Problem, SpecError, short, short_list, short_text, suggest


def has_placeholders(text: str) -> bool:
    return PLACEHOLDER.search(text) is not None


class Unbound(ValueError):
    """A ``${key}`` the draft's config cannot fill: ``key``, and what the config holds there (None: absent)."""

    def __init__(self, key: str, found: Any):
        self.key, self.found = key, found
        super().__init__(f"weight rule placeholder ${{{key}}} needs an integer or string '{key}' in the draft's "
                         f"config, found {short(found)}")


def bindable(config: Mapping[str, Any]) -> list[str]:
    """The keys a placeholder can name: those holding an integer or a string."""
    return sorted(k for k, v in config.items() if isinstance(v, (int, str)) and not isinstance(v, bool))


def bind(text: str, config: Mapping[str, Any], *, pattern: bool) -> str:
    """``text`` with each ``${key}`` replaced by ``config[key]`` (escaped for a regex when ``pattern``); an
    :class:`Unbound` for a key the config lacks or holds as anything but an integer or a string."""
    def value(m: re.Match) -> str:
        v = config.get(m.group(1))
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise Unbound(m.group(1), v)
        return re.escape(str(v)) if pattern else str(v).replace("\\", "\\\\")
    return PLACEHOLDER.sub(value, text)


def bind_rule(rule: Any, config: Mapping[str, Any]) -> Any:
    """A RegexRule with its placeholders bound (its inverse derived again when it became a literal prefix), a
    SplitRule with its match and parts bound; any other rule object is returned as it is."""
    if isinstance(rule, SplitRule):
        if not any(has_placeholders(t) for t in (rule.match, *rule.into)):
            return rule
        return SplitRule(match=bind(rule.match, config, pattern=True),
                         into=tuple(bind(t, config, pattern=False) for t in rule.into))
    if not isinstance(rule, RegexRule):
        return rule
    texts = [rule.match, rule.replace, *(rule.inverse or ())]
    if not any(has_placeholders(t) for t in texts):
        return rule
    # an inverse derived from the unbound texts holds the placeholder escaped (r'\$\{n\}'), which binding never
    # reaches: derive it from the bound texts instead
    derived = rule.inverse == RegexRule(match=rule.match, replace=rule.replace).inverse
    inverse = None if rule.inverse is None or derived else (bind(rule.inverse[0], config, pattern=True),
                                                            bind(rule.inverse[1], config, pattern=False))
    return RegexRule(match=bind(rule.match, config, pattern=True), replace=bind(rule.replace, config, pattern=False),
                     inverse=inverse)


def refusal(e: ValueError) -> str:
    """What a rule's checks refused, in their own words: a pydantic ValidationError's messages, not its dump (the
    input repeated, a documentation link, the text cut off mid-way)."""
    errors = e.errors() if isinstance(e, ValidationError) else [{"msg": str(e)}]
    return "; ".join(short_text(err["msg"].removeprefix("Value error, "), 300) for err in errors[:3])


class UnboundRules(SpecError):
    """Weight rules or ignore patterns that the draft's config cannot bind: a spec problem its checkpoints show
    (``validate`` does not call such a spec valid)."""


def bind_all(rules: Sequence[Any], ignore: Sequence[str], config: Mapping[str, Any]) -> tuple[list, list[str]]:
    """Every rule and ignore pattern bound; an :class:`UnboundRules` (source "weights") with one problem per item
    that cannot be, at its dotted path (``weights.rules.N``, ``weights.ignore.N``): a key the config lacks, with the
    keys it has, or a pattern the bound value makes invalid."""
    problems: list[Problem] = []

    def bound(path: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Unbound as e:
            keys = bindable(config)
            said = (f"the draft's config has no '{e.key}'" if e.key not in config else
                    f"the draft's config holds {short(e.found)} at '{e.key}', not an integer or string")
            problems.append(Problem(path, f"${{{e.key}}} cannot be bound: {said} (a Mistral params.json is read in "
                                          "Hugging Face names)",
                                    allowed=short_list(keys, 30, 600) if keys else "no key holds one",
                                    hint=suggest(e.key, keys).strip()))
        except ValueError as e:   # the bound text is no longer a valid pattern (RegexRule's and RuleSet's checks)
            problems.append(Problem(path, f"bound to the draft's config it is refused: {refusal(e)}"))

    out = ([bound(f"weights.rules.{i}", bind_rule, r, config) for i, r in enumerate(rules)],
           [bound(f"weights.ignore.{i}", bind, p, config, pattern=True) for i, p in enumerate(ignore)])
    for i, p in enumerate(out[1]):
        if p is not None and (why := pattern_problem(p)) is not None:
            problems.append(Problem(f"weights.ignore.{i}", f"bound to the draft's config it is refused: {why}"))
    if problems:
        raise UnboundRules("weights", problems)
    return out
