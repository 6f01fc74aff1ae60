"""Kills for specs/yaml_errors.py survivors (round 24d): odd_character_hint counts the file's lines and columns from
its very first character, so a spec that opens with a blank line has its pasted character said at the right place
(``text.count("\\n", 1, ...)`` / ``text.rfind("\\n", 1, ...)`` skipped the newline at index 0)."""
import pytest

import draftsmith
from draftsmith.errors import SpecError
from draftsmith.specs.yaml_errors import odd_character_hint


def test_a_spec_opening_with_a_blank_line_has_the_character_on_line_2(tmp_path):
    """A U+2028 on line 2 of a file whose line 1 is blank: line 2, column 15 (the newline at index 0 is counted
    as line 1's end, and the column is measured from it)."""
    spec = tmp_path / "s.yaml"
    spec.write_text("\ndescription: a\u2028b\nname: s\nextends: demo\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(spec)
    (p,) = info.value.problems
    assert p.hint.startswith("Line 2, column 15 holds U+2028, which YAML reads as a line break"), p


def test_a_space_right_after_a_leading_newline_is_line_2_column_1():
    """The first character after a leading newline is line 2, column 1 (not line 1, nor column 2)."""
    assert odd_character_hint("\n\u00a0a: 1\n").startswith("Line 2, column 1 holds U+00A0, a space YAML reads as text")
