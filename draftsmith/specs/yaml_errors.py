"""What a YAML error in a spec file is told: libyaml's own wording, short, and a hint for the mistakes its words do
not name (a regex escape in double quotes, a tab, a space YAML reads as text, a line indented unlike its
neighbour)."""
from __future__ import annotations

import re

import yaml

from draftsmith.errors import QUOTE_LIMIT, short_text


def short_yaml_error(e: yaml.YAMLError) -> str:
    """'line 3, column 5: found duplicate key ...' (libyaml's own wording, without its '<unicode string>')."""
    mark = getattr(e, "problem_mark", None)
    what = ": ".join(p for p in (getattr(e, "context", None), getattr(e, "problem", None)) if p) or str(e)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + (what if len(what) <= 400 else what[:397] + "...")


_QUOTED = re.compile(r'"((?:[^"\\\n]|\\.)*)"')   # one double-quoted scalar on one line, its escapes kept


def escape_hint(e: yaml.YAMLError, text: str) -> str:
    """For an unknown escape in a double-quoted scalar (``match: "^midlayer\\."``: YAML reads ``\\.`` as an escape,
    and only single quotes keep a backslash as it is), the advice to write it in single quotes, with the user's
    own text rewritten so (bounded); '' for any other YAML error."""
    mark = getattr(e, "context_mark", None)
    if "unknown escape" not in str(getattr(e, "problem", "")) or mark is None:
        return ""
    advice = "A regex in double quotes needs \\\\ for each \\; write it in single quotes"
    lines = text.splitlines()
    line = lines[mark.line][mark.column: mark.column + 1000] if mark.line < len(lines) else ""
    found = _QUOTED.match(line)
    if found is None:   # a scalar over several lines (or a column libyaml counts otherwise): the advice alone
        return advice
    # single-quoted, \\ and \" mean what they meant in double quotes, a ' is doubled, every other \ stays itself
    inner = re.sub(r'\\([\\"])', r"\1", found.group(1)).replace("'", "''")
    return f"{advice}: '{short_text(inner, QUOTE_LIMIT)}'"


def tab_hint(e: yaml.YAMLError, text: str) -> str:
    """For an error at a tab (libyaml: "found character that cannot start any token", without saying which), the
    advice to indent with spaces; '' for any other YAML error."""
    mark = getattr(e, "problem_mark", None)
    lines = text.splitlines() if mark is not None else []
    if mark is None or mark.line >= len(lines) or lines[mark.line][mark.column: mark.column + 1] != "\t":
        return ""
    return "The character there is a tab: YAML indents with spaces only; replace it with spaces"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


_ITEM_KEY = re.compile(r"""\s*- +([^\s{\[#'"][^:]*|'[^']*'|"[^"]*"):(\s|$)""")   # an item holding a block mapping
_SIGNIFICANT = re.compile(r"\s*[^\s#]")   # a line that is no blank and no comment


def _columns(lines: list[str], above: int, here: int) -> set[int]:
    """The columns a line dedented to ``here`` may stand at: those of the lines above back to the first less
    indented than ``here`` (a key or an item of an enclosing block, or an item's own keys)."""
    columns: set[int] = set()
    for line in (lines[i] for i in range(above, -1, -1) if _SIGNIFICANT.match(lines[i])):
        columns.add(_indent(line))
        if _ITEM_KEY.match(line):
            columns.add(len(line) - len(line.lstrip(" -")))
        if _indent(line) < here:
            break
    return columns


def indent_hint(e: yaml.YAMLError, text: str) -> str:
    """For a structure error (libyaml: "did not find expected '-' indicator", "expected <block end>", "mapping
    values are not allowed here") at a line indented unlike the lines above it, both indentations (libyaml names
    neither: one list item two spaces too deep reads as "expected '-' indicator"); '' for any other error, and where
    the line stands where YAML wants it (below a key opening a block, after its anchor or tag too; back at the
    column of an enclosing key): the mistake is elsewhere on it (``c: d: e``)."""
    mark, problem = getattr(e, "problem_mark", None), str(getattr(e, "problem", ""))
    lines = text.splitlines() if mark is not None else []
    if not isinstance(e, (yaml.scanner.ScannerError, yaml.parser.ParserError)) or mark.line >= len(lines) \
            or not ("expected" in problem or "not allowed" in problem):
        return ""
    above = next((i for i in range(mark.line - 1, -1, -1) if _SIGNIFICANT.match(lines[i])), None)
    if above is None:
        return ""
    here, there = _indent(lines[mark.line]), _indent(lines[above])
    line = re.sub(r"(\s+[&!]\S*)+$", "", re.sub(r"\s+#.*$", "", lines[above]).rstrip())   # 'key: &anchor' opens too
    # deeper is right below a key that opens a block, and two deeper below an item holding a key (its own keys)
    if here == there or here > there and line.endswith(":") or here == there + 2 and _ITEM_KEY.match(line):
        return ""
    if here < there and here in _columns(lines, above, here):
        return ""
    return (f"Line {mark.line + 1} is indented {here} space{'s' * (here != 1)}, line {above + 1} above it {there}: "
            "the items of one list and the keys of one mapping start in the same column")


# characters pasted from elsewhere that YAML reads otherwise than they look: a space it reads as text (a
# non-breaking space from a web page: libyaml then stops a line later, at a place that shows nothing wrong), and a
# line break to YAML 1.1 that few editors show as one (a U+2028 inside a value ends its line there, and the error's
# line numbers count it)
_ODD = ((re.compile("[\u00a0\u1680\u2000-\u200b\u202f\u205f\u3000]"),
         "a space YAML reads as text, not as a space; replace it with an ordinary space"),
        (re.compile("[\u0085\u2028\u2029]"), "which YAML reads as a line break (the error's line numbers count "
                                                "it); remove it, or put the value in double quotes"))


def odd_character_hint(text: str) -> str:
    """For a YAML error in a text holding one of the characters of ``_ODD``, where the first one is, by the file's
    own lines (a line break first: it moves the error's lines); '' where there is none."""
    for pattern, why in reversed(_ODD):
        if (found := pattern.search(text)) is not None:
            line = text.count("\n", 0, found.start()) + 1
            column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
            return f"Line {line}, column {column} holds U+{ord(found.group()):04X}, {why}"
    return ""


_ALIAS = re.compile(r"\*([^\s,\[\]{}]+)")   # an alias as YAML reads its name: up to a space or a flow indicator


def alias_hint(e: yaml.YAMLError, text: str) -> str:
    """For an undefined alias (libyaml says "found undefined alias", not which), the alias's name and how an anchor
    is defined; '' for any other YAML error."""
    mark = getattr(e, "problem_mark", None)
    lines = text.splitlines() if mark is not None else []
    if "undefined alias" not in str(getattr(e, "problem", "")) or mark is None or mark.line >= len(lines):
        return ""
    found = _ALIAS.match(lines[mark.line], mark.column)
    name = short_text(found.group(1), 100) if found else "NAME"
    return (f"*{name} names no anchor defined before it: define it as &{name} on the value it stands for, above "
            "its first use (in this file: aliases do not reach across files)")


def yaml_hint(e: yaml.YAMLError, text: str) -> str:
    """The first hint that speaks of this error in ``text``, or ''."""
    return (escape_hint(e, text) or tab_hint(e, text) or alias_hint(e, text) or odd_character_hint(text)
            or indent_hint(e, text))
