"""A split rule written for the name a rename makes ('layers.0.mlp.gate_up_proj', not the checkpoint's
'midlayer.mlp.gate_up_proj') never sees it, wherever it stands: the misfit's note says so (rules do not chain), where
only a later rule was looked at and the hint said 'use a split rule' to a spec that has one (a README audit)."""
from draftsmith.assembler.names import chain_note
from draftsmith.components.split_rule import SplitRule
from draftsmith.components.weights import RegexRule, RuleSet

SPLIT = SplitRule(match=r"^(layers\.\d+)\.mlp\.gate_up_proj\.", into=(r"\1.mlp.gate_proj.", r"\1.mlp.up_proj."))
RENAME = RegexRule(match=r"^midlayer\.", replace="layers.0.")
WANTED = {"layers.0.mlp.gate_proj.weight", "layers.0.mlp.up_proj.weight"}.__contains__


def note(rules: RuleSet) -> str | None:
    source = "midlayer.mlp.gate_up_proj.weight"
    made, index = rules.to_canonical(source)
    return chain_note(rules, [(source, made, index)], WANTED)


def test_a_split_rule_before_the_rename_is_named():
    said = note(RuleSet([SPLIT, RENAME]))
    assert said is not None and "rules do not chain" in said and "via rule 1" in said and \
        "rule 0: split" in said and "would make that 'layers.0.mlp.gate_proj.weight'" in said, said


def test_a_split_rule_after_the_rename_is_named_as_before():
    said = note(RuleSet([RENAME, SPLIT]))
    assert said is not None and "via rule 0" in said and "rule 1: split" in said, said


def test_a_later_rule_is_named_before_an_earlier_one():
    rules = RuleSet([SPLIT, RENAME, SPLIT])
    assert rules.other_rule("layers.0.mlp.gate_up_proj.weight", 1)[0] == 2
    assert rules.other_rule("layers.0.mlp.gate_up_proj.weight", 2)[0] == 0
    assert RuleSet([RENAME]).other_rule("layers.0.x", 0) is None
