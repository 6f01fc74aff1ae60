"""Kills for components/patterns.py survivors (round 22c): check_rename shows a pattern alone when there is no
template, and the pattern with its template when there is one."""
import pytest

from draftsmith.components.patterns import check_rename


def refusal(*args) -> str:
    with pytest.raises(ValueError) as info:
        check_rename(*args)
    return str(info.value)


def test_a_bad_pattern_alone_is_said_without_a_template():
    assert refusal("match", "a(").startswith("rule match 'a(' is not a valid regex: missing )")


def test_a_bad_rename_is_said_with_its_template():
    assert refusal("match", "^(a)", "\\2").startswith("rule match '^(a)' -> '\\2' is not a valid regex rename: "
                                                       "invalid group reference 2")
