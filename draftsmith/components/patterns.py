"""Bounded regexes for weight-name rules and module patterns (:mod:`draftsmith.components.weights`, quant's
``modules``): checking a pattern, matching and substituting with a timeout, and the literal forms a rename's inverse
is derived from.

Patterns are user input matched against user input (tensor names), so each match is bounded: patterns are
checked with ``re`` syntax and matched by the ``regex`` package with a timeout (``limits.REGEX_SECONDS``); a
pattern that backtracks past it raises :class:`RegexTimeout` naming the pattern and the name. The classic
catastrophic shape, a repeat of a repeat (``(a+)+``), is refused when the rule is validated.
"""
from __future__ import annotations

import functools
import re
import re._parser as sre_parse  # the stdlib's own parse tree of a pattern (stable since 3.11; sre_parse before)

import regex

from draftsmith import limits
from draftsmith.errors import DraftsmithError, short


class RegexTimeout(DraftsmithError, ValueError):
    """A weight-rule pattern took longer than ``limits.REGEX_SECONDS`` on one tensor name."""

    def __init__(self, pattern: str, name: str):
        self.pattern, self.name = pattern, name
        super().__init__(f"the weight-rule pattern {short(pattern)} took more than {limits.REGEX_SECONDS} s on the "
                         f"tensor name {short(name)} (catastrophic backtracking); write it without nested or "
                         "overlapping repeats")


_REPEATS = {sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, getattr(sre_parse, "POSSESSIVE_REPEAT", None)}


def _unbounded_repeat(item) -> list | None:
    """The body of an unbounded repeat (``x*``, ``x+``, ``x{2,}``), looking through groups; else None."""
    op, av = item
    if op == sre_parse.SUBPATTERN:
        body = list(av[-1])
        return _unbounded_repeat(body[0]) if len(body) == 1 else None
    if op in _REPEATS and av[1] == sre_parse.MAXREPEAT:
        return list(av[2])
    return None


def _nested_repeat(items) -> bool:
    """True when an unbounded repeat's whole body is itself an unbounded repeat: (a+)+, (?:a*)*, ((ab)+)*."""
    for op, av in items:
        if op in _REPEATS:
            body = list(av[2])
            if av[1] == sre_parse.MAXREPEAT and len(body) == 1 and _unbounded_repeat(body[0]) is not None:
                return True
            if _nested_repeat(body):
                return True
        elif op == sre_parse.SUBPATTERN and _nested_repeat(av[-1]):
            return True
        elif op == sre_parse.BRANCH and any(_nested_repeat(b) for b in av[1]):
            return True
        elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT) and _nested_repeat(av[1]):
            return True
    return False


# a config value in a weight rule (components/rule_config.py binds it): one top-level key of the draft's config
PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
_QUANTIFIER = re.compile(r"\{(\d+|\d*,\d*)\}")   # x{2}, x{2,}, x{,3}, x{2,3}: what re reads as a repeat


def _brace_problem(pattern: str) -> str | None:
    """A '{' that ``re`` reads as a literal brace (outside a character class, not escaped, not a repeat count,
    not a ``${key}`` placeholder), or a ``${`` that is no placeholder. The ``regex`` package that matches the
    names reads such a brace as its fuzzy-matching syntax (``fc{e}`` matches 'fx'), or fails on it."""
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":   # an escape; \N{NAME} (a character by its name) whole
            i = pattern.find("}", i) + 1 or len(pattern) if pattern.startswith("\\N{", i) else i + 2
            continue
        if not in_class and pattern.startswith("(?#", i):   # a comment, braces and all
            i = pattern.find(")", i) + 1 or len(pattern)
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class, i = True, i + 1
            i += pattern[i:i + 1] == "^"
            i += pattern[i:i + 1] == "]"   # a ']' first in the class is a literal
            continue
        elif ch == "$" and pattern[i + 1:i + 2] == "{":
            if (m := PLACEHOLDER.match(pattern, i)) is None:
                found = pattern[i:pattern.find("}", i) + 1 or i + 20]
                return (f"{short(found)} is no placeholder: a placeholder names one top-level key of the draft's "
                        "config, as ${num_hidden_layers} (letters, digits and _); a literal brace is written '\\{'")
            i = m.end()
            continue
        elif ch == "{" and _QUANTIFIER.match(pattern, i) is None:
            return (f"the '{{' at position {i} is a literal brace to Python's re, but the regex package that matches "
                    "the names may read it as fuzzy matching ('fc{e}' matches 'fx'); escape it as '\\{' (a config "
                    "value is written ${key})")
        i += 1
    return None


def pattern_problem(pattern: str) -> str | None:
    """Why a weight-rule pattern is refused (too long, not ``re`` syntax, a brace ``re`` and the ``regex`` package
    read differently, a repeat of a repeat), or None."""
    if len(pattern) > limits.REGEX_CHARS:
        return f"a pattern of {len(pattern)} characters; at most {limits.REGEX_CHARS}"
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"not a valid regular expression: {exc}"
    if (why := _brace_problem(pattern)) is not None:
        return why
    if _nested_repeat(tree):
        return ("a repeat of a repeat (like '(a+)+') backtracks exponentially on names it almost matches; "
                "repeat the inner part once, e.g. '(a+)+' -> 'a+'")
    return None


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> regex.Pattern:
    return regex.compile(pattern)


def search(pattern: str, name: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``name``, under the regex time bound (RegexTimeout past it)."""
    try:
        return _compiled(pattern).search(name, timeout=limits.REGEX_SECONDS) is not None
    except TimeoutError:
        raise RegexTimeout(pattern, name) from None


def substitute(pattern: str, template: str, name: str) -> str:
    """``name`` with the first match of ``pattern`` replaced by ``template`` (re.sub), under the time bound."""
    try:
        return _compiled(pattern).sub(template, name, count=1, timeout=limits.REGEX_SECONDS)
    except TimeoutError:
        raise RegexTimeout(pattern, name) from None

_SPECIAL = set(".^$*+?{}[]|()")


def _literal_run(pattern: str) -> tuple[str, bool]:
    """The literal text ``pattern`` begins with (escaped punctuation unescaped), and whether that is all of it."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1].isalnum():
                break  # \d, \1, \b ... are classes or references, not literals
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch in _SPECIAL:
            if ch in "*+?{" and out:   # a repeat of the last character: it is not surely there
                out.pop()
            break
        out.append(ch)
        i += 1
    return "".join(out), i == len(pattern)


def literal_of(pattern: str) -> str | None:
    """The literal string a regex matches, if it is only literals and escaped punctuation; else None."""
    text, whole = _literal_run(pattern)
    return text if whole else None


def literal_head(pattern: str) -> str:
    r"""The literal text every name an anchored pattern (``^...``) matches begins with; '' for one not anchored, or
    with alternatives at its top level (``^model\.mtp\.|^mtp\.``: a name may take either)."""
    return _literal_run(pattern[1:])[0] if pattern.startswith("^") and not _branches(pattern) else ""


def _branches(pattern: str) -> bool:
    """Whether ``pattern`` has a ``|`` outside every group and character class."""
    depth, i, in_class = 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        i += 1
        if ch == "\\":
            i += 1   # the escaped character, whatever it is
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            i += pattern[i:i + 1] == "^"
            i += pattern[i:i + 1] == "]"   # a ] first in a class is one of its members
        elif ch in "()":
            depth += 1 if ch == "(" else -1
        elif ch == "|" and depth == 0:
            return True
    return False


def template_literal(text: str) -> str:
    """Escape a literal string for use as an `re.sub` replacement template."""
    return text.replace("\\", "\\\\")


_DOLLAR = re.compile(r"\$\{?(\d+)")


def dollar_problem(template: str) -> str | None:
    """Why a replacement template holding ``$1`` (JavaScript's, sed -E's group syntax) is refused, or None: Python's
    re.sub writes it as the literal text '$1', which only a load would show, as a name nothing expects."""
    if (m := _DOLLAR.search(template)) is None:
        return None
    n = m.group(1)
    return (f"{short(template)} holds {m.group()!r}, which Python's re.sub writes as the literal text {m.group()!r}, "
            f"not group {n}: write the group as '\\{n}' or '\\g<{n}>'")


def _template_hint(exc: re.error | IndexError, compiled: re.Pattern) -> str:
    """How to mend a replacement template re refused: a group number the match does not have, Python's \\g
    spelt without <>, an escape re.sub does not take (``\\d`` copied from the match)."""
    message = getattr(exc, "msg", str(exc))
    if message.startswith("unknown group name"):
        names = list(compiled.groupindex)
        return (f"; the match names {', '.join(map(repr, names))}" if names else
                "; the match names no group: name one as (?P<name>...), or refer to a group by number ('\\1')")
    if message.startswith("invalid group reference"):
        groups = compiled.groups
        if not groups:
            return "; the match has no groups: put the part to keep in parentheses, e.g. '^blocks\\.(\\d+)\\.'"
        refs = "'\\1'" if groups == 1 else f"'\\1' to '\\{groups}'"
        return f"; the match has {groups} group{'s' * (groups != 1)}: refer to {('it', 'them')[groups > 1]} as {refs}"
    if message in ("missing <", "missing group name"):
        return "; write a group as '\\g<1>' (or '\\1')"
    if message.startswith("bad escape"):
        return "; a replacement takes group references ('\\1', '\\g<1>') and plain text, not pattern escapes"
    return ""


GROUP_REF = re.compile(r"\\(?:\d+|g<[^>]*>)")   # a group reference in a replacement template


def _writes_backslash(template: str) -> bool:
    """Whether re.sub writes a backslash of ``template`` into every name (its group references left out: ``\\.``
    and ``\\\\`` are kept as written, a backslash included)."""
    plain = re.sub(rf"\\\\|{GROUP_REF.pattern}", lambda m: m.group() if m.group() == "\\\\" else "", template)
    try:
        return "\\" in re.sub("^", plain, "", count=1)
    except (re.error, IndexError):
        return False


def check_rename(what: str, pattern: str, template: str | None = None) -> None:
    """A ValueError when ``pattern`` -> ``template`` is not a valid, bounded regex rename (``template`` None: when
    ``pattern`` is not a valid, bounded regex)."""
    if len(pattern) <= limits.REGEX_CHARS:   # a longer one is refused below, before anything compiles it
        shown = short(pattern) if template is None else f"{short(pattern)} -> {short(template)}"
        refused = f"rule {what} {shown} is not a valid regex{' rename' * (template is not None)}"
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{refused}: {exc}") from exc
        try:   # a bad group reference fails even without a match
            if template is not None:
                compiled.sub(template, "")
        except (re.error, IndexError) as exc:   # IndexError: a \g<name> the match does not name (Python 3.11)
            raise ValueError(f"{refused}: {exc}{_template_hint(exc, compiled)}") from exc
        if template is not None and _writes_backslash(template):   # no tensor name holds one
            raise ValueError(f"{refused}: it writes a backslash into the names (in a replacement '\\.' is a backslash "
                             "and a dot: a replacement is no pattern); write '.'")
    if (why := pattern_problem(pattern)) is not None:
        raise ValueError(f"rule {what} {short(pattern)} is refused: {why}")
