"""Mistakes a spec author makes that libyaml / re word without the fix (a new-user walk, 2026-12-01): a list item or
key indented unlike its neighbour, a replacement naming a group the match lacks (by number or name: a name was an
internal error, re raises IndexError for it on Python 3.11), Python's \\g without <>, a pattern escape in a
replacement. A rule refused as a whole is not said again as Python's repr of the mapping ("found {'match': ...}")."""
from __future__ import annotations

import pytest
import yaml

import draftsmith
from draftsmith.components.weights import RegexRule
from draftsmith.errors import SpecError
from draftsmith.specs.yaml_errors import indent_hint
from test_problem_places import LLAMA   # the built-in spec's text, shared

RULE = "    - {match: '^midlayer\\.', replace: 'layers.0.'}\n"


def problems(tmp_path, text: str):
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace("name: eagle3-llama", "name: mine"))
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(path)
    return info.value.problems


def test_the_builtin_text_holds_the_rule_these_tests_edit():
    assert RULE in LLAMA


def test_a_list_item_two_spaces_too_deep_says_both_indentations(tmp_path):
    text = LLAMA.replace(RULE, RULE + "  " + RULE)
    line = text.splitlines().index("  " + RULE.rstrip("\n")) + 1
    (p,) = problems(tmp_path, text)
    assert p.message.startswith(f"not valid YAML: line {line}, column ")
    assert p.hint == (f"Line {line} is indented 6 spaces, line {line - 1} above it 4: the items of one list and the "
                      "keys of one mapping start in the same column")


def hint(text: str) -> str:
    try:
        yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as e:
        return indent_hint(e, text)
    raise AssertionError("the text is valid YAML")


@pytest.mark.parametrize("text, said", [
    ("a:\n  - {x: 1}\n    - {x: 2}\n", "Line 3 is indented 4 spaces, line 2 above it 2"),
    ("a:\n  b: 1\n    c: 2\n  d: 3\n", "Line 3 is indented 4 spaces, line 2 above it 2"),
    ("a:\n  b:\n    c: 1\n   d: 2\n", "Line 4 is indented 3 spaces, line 3 above it 4"),
    ("a:\n  b:   # a comment\n    c: 1\n      d: 2\n", "Line 4 is indented 6 spaces, line 3 above it 4"),
    ("a:\n  - 1\n - 2\n", "Line 3 is indented 1 space, line 2 above it 2"),
    ("a:\n  - k: 1\n      j: 2\n", "Line 3 is indented 6 spaces, line 2 above it 2"),
    ("a:\n  - k: 1\n    j: 2\n\n   # note\n   z: 3\n", "Line 6 is indented 3 spaces, line 3 above it 4"),
])
def test_indentation_unlike_the_line_above_is_said(text, said):
    assert hint(text).startswith(said + ":"), hint(text)


@pytest.mark.parametrize("text", ["a: [1, 2\nb: 3\n",          # an unclosed flow list: same indentation
                                  "a: 'x\nb: 3\n",             # an unclosed quote
                                  "a: 1\na: {b: [}\n"])
def test_no_indent_hint_where_the_lines_agree(text):
    assert hint(text) == ""


@pytest.mark.parametrize("replace, said", [
    ("layers.\\\\2.", "invalid group reference 2 at position 8; the match has 1 group: refer to it as '\\1'"),
    ("layers.\\\\g1.", "missing < at position 9; write a group as '\\g<1>' (or '\\1')"),
    ("layers.\\\\g<x>.", "unknown group name 'x'; the match names no group: name one as (?P<name>...), or refer to a "
                         "group by number ('\\1')"),
    ("layers.\\\\d.", "bad escape \\d at position 7; a replacement takes group references ('\\1', '\\g<1>') and "
                      "plain text, not pattern escapes"),
])
def test_a_replacement_the_match_cannot_fill_says_how_to_mend_it(tmp_path, replace, said):
    text = LLAMA.replace(RULE, RULE.replace("'^midlayer\\.'", "'^mid(layer)\\.'").replace("'layers.0.'",
                                                                                         f'"{replace}"'))
    (p,) = problems(tmp_path, text)
    assert p.path == "weights.rules.0"
    assert p.message.endswith(said), p.message
    assert "(found" not in p.render()


@pytest.mark.parametrize("match, replace, said", [
    ("^(?P<n>a)(b)", "\\g<x>", "unknown group name 'x'; the match names 'n'"),
    ("^(a)(b)", "\\3", "the match has 2 groups: refer to them as '\\1' to '\\2'"),
    ("^ab", "\\1", "the match has no groups: put the part to keep in parentheses, e.g. '^blocks\\.(\\d+)\\.'"),
])
def test_group_hints_count_and_name_the_matchs_groups(match, replace, said):
    with pytest.raises(ValueError) as info:
        RegexRule(match=match, replace=replace)
    assert said in str(info.value)


@pytest.mark.parametrize("replace, refused", [
    (r"layers\.0\.", True), (r"x\\y", True), (r"x\\1", True),          # a backslash written into every name
    (r"\g<1>\.x", True), (r"x.\g<1>\\", True),                        # beside a named-form group reference
    (r"layers.\1.mlp.", False), (r"\g<1>.x", False), ("plain.", False), (r"a\nb", False)])
def test_a_replacement_that_writes_a_backslash_is_refused(replace, refused):
    """`replace: 'layers\\.0\\.'` (a pattern's escaped dot copied into the replacement) loaded and renamed every name
    to 'layers\\.0\\.fc.weight', which no model has (a mutation round's finding, 2026-12-01)."""
    if refused:
        with pytest.raises(ValueError, match="it writes a backslash into the names"):
            RegexRule(match=r"^(midlayer)\.", replace=replace)
    else:
        RegexRule(match=r"^(midlayer)\.", replace=replace)
