"""Kills of a mutation run over specs/resolve.py (round 16): the regex length limit's boundary and the edges of the
control-character check on weight patterns and rules."""
import pytest

from draftsmith import limits
from draftsmith.specs.resolve import control_problems, regex_problems, rule_control_problems


def test_lookbehind_at_the_length_limit_is_refused():
    """A pattern of exactly REGEX_CHARS characters is still compiled by re: its compile-stage errors are said."""
    pattern = "(?<=a+)" + "b" * (limits.REGEX_CHARS - 7)
    assert len(pattern) == limits.REGEX_CHARS
    problems = regex_problems(pattern, "weights.ignore.0")
    assert len(problems) == 1 and problems[0].message.startswith("not a valid regular expression"), problems


def test_unparsable_at_the_length_limit_says_the_syntax():
    pattern = "(" + "a" * (limits.REGEX_CHARS - 1)
    [p] = regex_problems(pattern, "weights.ignore.0")
    assert p.message.startswith("not a valid regular expression") and "re syntax" in p.allowed, p


def test_a_space_is_not_a_control_character():          # kills 206: ord(c) < 32 -> <= 32 / < 33
    assert control_problems("model layers", "weights.ignore.0") == []


def test_the_last_c0_character_is_one():                 # kills 206: ord(c) < 32 -> < 31
    [p] = control_problems("a\x1fb", "weights.ignore.0")
    assert "control character '\\x1f'" in p.message


def test_inverse_second_item_is_said_as_a_replacement():  # kills 228: j < 2 -> j < 1
    [p] = rule_control_problems({"match": "a", "replace": "b", "inverse": ["ok", "x\ty"]}, "weights.rules.0")
    assert p.path == "weights.rules.0.inverse.1" and p.message.startswith("the replacement holds"), p


@pytest.mark.parametrize("inverse", [["a", "b", "c"], ["a", "b", "c\td"]])
def test_an_inverse_of_three_items_does_not_crash_phase_2(inverse):  # kills 228: j < 2 -> j <= 2 / j < 3
    # phase 2 reads the raw mapping even where phase 1 refuses it (an inverse is a pair), so it must not index
    # past the pair's two words
    problems = rule_control_problems({"match": "a", "replace": "b", "inverse": inverse}, "weights.rules.0")
    assert len(problems) == ("\t" in inverse[2])
    assert all(p.message.startswith("the item holds") for p in problems), problems   # an inverse has no part names
