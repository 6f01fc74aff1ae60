"""Kills for specs/yaml_errors.py survivors (round 22c): indent_hint's walk up to the line above (down to the first
line, and no further) and the excuse for a key two columns past an item's dash (``- k: 1`` then ``  j: ...``)."""

from test_rule_and_indent_hints import hint   # libyaml's error for a text, and its indent hint



def test_the_first_line_can_be_the_line_above():
    """The line above an error on line 2 is line 1 (the walk up reaches index 0)."""
    assert hint("a: 1\n  b: 2\n").startswith("Line 2 is indented 2 spaces, line 1 above it 0:"), hint("a: 1\n  b: 2\n")


def test_an_error_on_the_first_line_has_no_line_above():
    """Nothing is above line 1: the walk does not wrap round to the last line (lines[-1])."""
    assert hint("a: b: c\n  d: 1\n") == ""


def test_the_walk_up_skips_blank_lines_one_at_a_time():
    """A blank line between is skipped, and the next line up is the one compared (not the one after it)."""
    text = "a:\n  b: 1\n\n    c: 2\n"
    assert hint(text).startswith("Line 4 is indented 4 spaces, line 2 above it 2:"), hint(text)


def test_a_key_two_past_an_items_dash_is_that_items_key():
    """A line two columns deeper than '- k: ...' holds the item's own keys: an error there is no indentation's."""
    assert hint("a:\n  - k: 1\n    j: 2: 3\n") == ""
