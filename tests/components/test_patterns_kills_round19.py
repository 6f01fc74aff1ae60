"""Mutation survivors of draftsmith/components/patterns.py (round 19): a rename whose pattern is exactly
limits.REGEX_CHARS long is still compiled with its template (a bad group reference refused when validated, not
when a tensor name matches), and literal_of says None for a pattern ending in a lone backslash."""
import pytest
from pydantic import ValidationError

from draftsmith import limits
from draftsmith.components.patterns import check_rename, literal_of
from draftsmith.components.weights import RegexRule


def test_a_rename_of_a_pattern_at_the_length_bound_has_its_template_checked():
    # catches patterns.py:140 `len(pattern) <= limits.REGEX_CHARS` -> `<` (a pattern of exactly the bound skipped
    # the compile: its template's '\1' with no group was accepted, and an invalid pattern got pattern_problem's
    # message instead of the rename's)
    pattern = "^" + "a" * (limits.REGEX_CHARS - 1)
    assert len(pattern) == limits.REGEX_CHARS
    check_rename("match", pattern, "x")                                    # the bound itself is taken
    with pytest.raises(ValueError, match=r"is not a valid regex rename: invalid group reference 1"):
        check_rename("match", pattern, r"\1")
    with pytest.raises(ValidationError, match=r"invalid group reference 1"):
        RegexRule(match=pattern, replace=r"\1")
    bad = "a" * (limits.REGEX_CHARS - 1) + "("
    with pytest.raises(ValueError, match=r"is not a valid regex: missing \), unterminated subpattern"):
        check_rename("match", bad)


@pytest.mark.parametrize("pattern, escaped", [("\\", "\\"), ("layers\\", "layers\\"), ("a\\.b\\", "a.b\\")])
def test_literal_of_a_pattern_ending_in_a_lone_backslash_is_none(pattern, escaped):
    # catches patterns.py:107 `i + 1 >= len(pattern)` -> `>`, `i - 1 >= ...`, `i + 0 >= ...` (each reads
    # pattern[i + 1] past the end: IndexError instead of "not a literal"); the backslash escaped is a literal one
    assert literal_of(pattern) is None
    assert literal_of(pattern + "\\") == escaped
