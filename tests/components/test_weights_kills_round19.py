"""Kills the survivors of a mutation run on draftsmith/components/weights.py (round 19)."""

import dataclasses

import pytest

from draftsmith.components.weights import RegexRule, RemapResult, RuleSet


def test_later_rule_looks_only_past_the_rule_that_made_the_name():
    """A rule whose output it matches again (``^a.`` -> ``a.b.``) is not a 'later' rule for its own output: rules
    do not chain, and chain_note would otherwise say 'rule 0 ... and rule 0 would make that ...'."""
    again = RuleSet([RegexRule(match=r"^a\.", replace="a.b.")])
    assert again.to_canonical("a.x") == ("a.b.x", 0)
    assert again.later_rule("a.b.x", 0) is None
    two = RuleSet([RegexRule(match=r"^a\.", replace="a.b."), RegexRule(match=r"^a\.b\.", replace="c.")])
    assert two.later_rule("a.b.x", 0) == (1, ("c.x",))
    assert two.later_rule("a.b.x", 1) is None


def test_remap_result_is_immutable():
    """RemapResult is a frozen record of what remap learned: a caller cannot rebind its fields."""
    result = RuleSet([RegexRule(match=r"^m\.", replace="")]).remap(["m.w", "v"])
    assert isinstance(result, RemapResult)
    assert result.mapping == {"w": ("m.w", 0), "v": ("v", None)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.mapping = {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.collisions = {"w": ("a", "b")}
