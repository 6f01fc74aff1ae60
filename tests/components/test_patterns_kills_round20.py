"""Kills for components/patterns.py survivors (round 20): _brace_problem's character-class scan and the text a
'${' that is no placeholder is quoted by."""
import re

import pytest

from draftsmith.components.patterns import pattern_problem, search


@pytest.mark.parametrize("pattern, name", [(r"[a{]x", "{x"), (r"[ab{]x", "ax"), (r"^l[0-9{}]\.", "l{.")])
def test_a_brace_after_other_characters_of_a_class_is_in_the_class(pattern, name):
    assert pattern_problem(pattern) is None
    assert search(pattern, name) == (re.search(pattern, name) is not None) is True


@pytest.mark.parametrize("pattern", [r"fc[0]{e}", r"^[x]{e}\.", r"a[^b]{e}"])
def test_a_literal_brace_after_a_one_character_class_is_refused(pattern):
    assert "escape it as '\\{'" in (pattern_problem(pattern) or ""), pattern


def test_an_unclosed_dollar_brace_is_quoted_with_what_follows_it():
    why = pattern_problem(r"^layers\.${num")
    assert why.startswith("'${num' is no placeholder"), why
    assert pattern_problem(r"^${").startswith("'${' is no placeholder")
