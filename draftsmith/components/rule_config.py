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

from draftsmith.components.weights import RegexRule
from draftsmith.errors import short

PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def has_placeholders(text: str) -> bool:
    return PLACEHOLDER.search(text) is not None


def bind(text: str, config: Mapping[str, Any], *, pattern: bool) -> str:
    """``text`` with each ``${key}`` replaced by ``config[key]`` (escaped for a regex when ``pattern``)."""
    def value(m: re.Match) -> str:
        v = config.get(m.group(1))
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise ValueError(f"weight rule placeholder ${{{m.group(1)}}} needs an integer or string "
                             f"'{m.group(1)}' in the draft's config.json, found {short(v)}")
        return re.escape(str(v)) if pattern else str(v).replace("\\", "\\\\")
    return PLACEHOLDER.sub(value, text)


def bind_rule(rule: Any, config: Mapping[str, Any]) -> Any:
    """A RegexRule with its placeholders bound (its inverse derived again when it became a literal prefix);
    any other rule object is returned as it is."""
    if not isinstance(rule, RegexRule):
        return rule
    texts = [rule.match, rule.replace, *(rule.inverse or ())]
    if not any(has_placeholders(t) for t in texts):
        return rule
    inverse = None if rule.inverse is None else (bind(rule.inverse[0], config, pattern=True),
                                                  bind(rule.inverse[1], config, pattern=False))
    return RegexRule(match=bind(rule.match, config, pattern=True), replace=bind(rule.replace, config, pattern=False),
                     inverse=inverse)


def bind_all(rules: Sequence[Any], ignore: Sequence[str], config: Mapping[str, Any]) -> tuple[list, list[str]]:
    return [bind_rule(r, config) for r in rules], [bind(p, config, pattern=True) for p in ignore]
