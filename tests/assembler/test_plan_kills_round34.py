"""Mutation survivors (round 34) of draftsmith.assembler.plan's unreached-split hint: a two-part split rule (gate_up)
is named as well as a three-part one, a later rename that matches is no split rule to name, and a fused name no
rule took gets no hint (the plain "use a split rule" then)."""
from draftsmith.assembler.plan import _unreached_split
from draftsmith.components.split_rule import SplitRule
from draftsmith.components.weights import RegexRule, RuleSet

RENAME = RegexRule(match=r"^midlayer\.", replace="layers.0.")
GATE_UP = ["layers.0.mlp.gate_proj.", "layers.0.mlp.up_proj."]
NAME, MADE = "midlayer.mlp.gate_up_proj.weight", "layers.0.mlp.gate_up_proj.weight"


def test_a_two_part_split_rule_a_rename_takes_the_name_from_is_named():
    rules = RuleSet([RENAME, SplitRule(match=r"^midlayer\.mlp\.gate_up_proj\.", into=GATE_UP)])
    assert _unreached_split([NAME], {NAME: (0, MADE)}, rules) == (
        "split rule 1 matches it, but rule 0 takes it first: put the split rule above it")


def test_a_two_part_split_rule_for_the_renamed_name_is_named():
    rules = RuleSet([RENAME, SplitRule(match=r"^layers\.0\.mlp\.gate_up_proj\.", into=GATE_UP)])
    assert _unreached_split([NAME], {NAME: (0, MADE)}, rules) == (
        f"split rule 1 matches '{MADE}', the name rule 0 makes of it, but a rule never sees another's name: match the "
        "checkpoint's name")


def test_a_rename_is_no_split_rule_and_an_untaken_name_gets_no_hint():
    rules = RuleSet([RENAME, RegexRule(match=r"^midlayer\.mlp\.", replace="mlp."),
                     RegexRule(match=r"^layers\.0\.mlp\.", replace="mlp.")])
    assert _unreached_split([NAME], {NAME: (0, MADE)}, rules) is None
    split = RuleSet([SplitRule(match=r"^midlayer\.mlp\.gate_up_proj\.", into=GATE_UP)])
    assert _unreached_split([NAME], {}, split) is None
