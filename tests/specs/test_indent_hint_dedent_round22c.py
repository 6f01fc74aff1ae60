"""indent_hint must not blame indentation where it is right (round 22c review; these FAIL on 2d3ef70): a line
dedented back to the column of a key above it (``c: d: e`` after a nested block) and a line below a key whose block
opens after an anchor or a tag (``defaults: &d``) are where YAML wants them; the error is elsewhere on the line."""
import pytest

from test_rule_and_indent_hints import hint   # libyaml's error for a text, and its indent hint



@pytest.mark.parametrize("text", [
    "a:\n  b: 1\nc: d: e\n",                                                  # a colon in a value, after a block
    "a:\n  - 1\nb: {x: 1} y\n",                                               # text after a flow mapping
    "weights:\n  rules:\n    - {match: 'a', replace: 'b'}\nname: mine: x\n",  # back to the top level
    "defaults: &d\n  lr: 1: 2\n",                                             # a block after an anchor
    "defaults: !!map\n  lr: 1: 2\n",                                          # ... after a tag
    "defaults:\n  lr: 1\n<<: 5\n",                                             # a constructor's 'expected'
])
def test_no_indent_hint_where_the_indentation_is_right(text):
    assert hint(text) == ""


def test_a_dedent_to_no_column_above_is_still_said():
    """The fix must keep the hint for a dedent that lands between two columns."""
    assert hint("a:\n  b:\n    c: 1\n   d: 2\n").startswith("Line 4 is indented 3 spaces, line 3 above it 4")
