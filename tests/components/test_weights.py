"""Weight-name rules: rule semantics by example, and injectivity (invariant 22) as a property."""

import itertools
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from draftsmith.components.weights import RegexRule, RemapCollision, RuleSet

MIDLAYER = RegexRule(match=r"^midlayer\.", replace="layers.0.")


def test_literal_prefix_rule_gets_an_inverse():
    assert MIDLAYER.inverse == (r"^layers\.0\.", "midlayer.")
    # every escaped character is kept once, and what follows it too
    assert RegexRule(match=r"^model\.lay-ers\.", replace="m.").inverse == (r"^m\.", "model.lay-ers.")
    assert MIDLAYER.apply("midlayer.mlp.up_proj.weight") == "layers.0.mlp.up_proj.weight"
    assert MIDLAYER.apply("fc.weight") is None
    assert MIDLAYER.invert("layers.0.mlp.up_proj.weight") == "midlayer.mlp.up_proj.weight"
    assert MIDLAYER.invert("layers.1.mlp.up_proj.weight") is None
    assert MIDLAYER.describe(0) == r"rule 0: '^midlayer\.' -> 'layers.0.'"


def test_rules_that_are_not_literal_prefixes_have_no_derived_inverse():
    for rule in (RegexRule(match=r"^layers\.(\d+)\.", replace=r"blocks.\1."),
                 RegexRule(match=r"^midlayer.", replace="layers.0."),  # unescaped '.' is a wildcard
                 RegexRule(match=r"midlayer\.", replace="layers.0."),  # not anchored
                 RegexRule(match=r"^layer\d\.", replace="layers.0.")):  # \d is a class, not the letter d
        assert rule.inverse is None
        with pytest.raises(ValueError, match="has no inverse"):
            rule.invert("layers.0.x")
    explicit = RegexRule(match=r"^layers\.(\d+)\.", replace=r"blocks.\1.", inverse=(r"^blocks\.(\d+)\.", r"layers.\1."))
    assert explicit.invert("blocks.3.w") == "layers.3.w"


def test_bad_regexes_and_unknown_fields_are_refused():
    with pytest.raises(ValidationError, match="not a valid regex"):
        RegexRule(match="(", replace="x")
    with pytest.raises(ValidationError, match="invalid group reference"):
        RegexRule(match="^a", replace=r"\1")
    with pytest.raises(ValidationError):
        RegexRule(match="^a", replace="b", prefix="c")
    with pytest.raises(ValidationError):
        MIDLAYER.match = "x"  # frozen
    with pytest.raises(ValueError, match="ignore pattern"):
        RuleSet([], ignore=["["])


def test_a_dollar_group_is_refused_in_an_inverse_template_too():
    """re.sub writes '$1' literally, so an inverse template holding it would write names nothing expects; the group
    is named in the message (the template's own, not the whole match)."""
    with pytest.raises(ValidationError, match=r"not group 2: write the group as '\\2'"):
        RegexRule(match=r"^blocks\.(\d+)\.(\d+)\.", replace=r"layers.\1.\2.",
                  inverse=(r"^layers\.(\d+)\.(\d+)\.", r"blocks.\1.${2}."))
    with pytest.raises(ValidationError, match=r"holds '\$1'"):
        RegexRule(match="^a", replace="b.$1")


def test_first_matching_rule_wins_and_ignore_comes_first():
    rules = RuleSet([RegexRule(match=r"^model\.", replace=""), RegexRule(match=r"^model\.fc\.", replace="fusion.")],
                    ignore=[r"rotary_emb\.inv_freq$"])
    assert rules.to_canonical("model.fc.weight") == ("fc.weight", 0)
    assert rules.to_canonical("lm_head.weight") == ("lm_head.weight", None)
    assert rules.to_canonical("model.layers.0.rotary_emb.inv_freq") == (None, None)
    # a rule that strips a prefix loads such names too; the layout's own names stay unprefixed (no derived inverse)
    assert rules.rules[0].inverse is None and rules.from_canonical("fc.weight") == "fc.weight"
    stated = RuleSet([RegexRule(match=r"^model\.", replace="", inverse=("^", "model."))])
    assert stated.from_canonical("fc.weight") == "model.fc.weight"   # a layout that is prefixed says so


def test_from_canonical_returns_a_true_preimage_or_refuses():
    rules = RuleSet([MIDLAYER])
    assert rules.from_canonical("layers.0.mlp.up_proj.weight") == "midlayer.mlp.up_proj.weight"
    assert rules.from_canonical("fc.weight") == "fc.weight"
    opaque = RuleSet([RegexRule(match=r"^layers\.(\d+)\.", replace=r"blocks.\1.")])
    with pytest.raises(ValueError, match="no checkpoint name maps to canonical 'layers.0.w'") as info:
        opaque.from_canonical("layers.0.w")  # 'layers.0.w' itself would be renamed, and the rule has no inverse
    assert str(info.value).endswith(f"; rules without an inverse: {opaque.rules[0].describe(0)}")


def test_map_names_lists_every_colliding_pair():
    rules = RuleSet([MIDLAYER, RegexRule(match=r"^mid\.", replace="layers.0.")])
    names = ["midlayer.norm.weight", "mid.norm.weight", "layers.0.norm.weight", "fc.weight"]
    with pytest.raises(RemapCollision) as info:
        rules.map_names(names)
    got = {frozenset(p[:2]) for p in info.value.pairs}
    assert got == {frozenset(p) for p in itertools.combinations(names[:3], 2)}
    assert all(p[2] == "layers.0.norm.weight" for p in info.value.pairs)
    for name in names[:3]:
        assert repr(name) in str(info.value)
    # each name says how it got there: the rule that renamed it, or that none did
    assert f"'midlayer.norm.weight' via {rules.rules[0].describe(0)}" in str(info.value)
    assert f"'mid.norm.weight' via {rules.rules[1].describe(1)}" in str(info.value)
    assert "'layers.0.norm.weight' (no rule matched; name kept)" in str(info.value)
    assert RuleSet([MIDLAYER]).map_names(["midlayer.norm.weight", "fc.weight"]) == {
        "layers.0.norm.weight": ("midlayer.norm.weight", 0), "fc.weight": ("fc.weight", None)}


# ---- invariant 22: injective, or every collision reported ------------------------------------------------------

ATOMS = ["a.", "b.", "layers.0.", "layers.1.", "midlayer.", "model.", ""]
SUFFIXES = ["x", "y.z", "0.w", "norm.weight"]
REGEX_RULES = [RegexRule(match=r"^layers\.(\d+)\.", replace=r"blocks.\1."),
               RegexRule(match=r"\.weight$", replace=""),
               RegexRule(match=r"^(a|b)\.", replace="ab.")]
literal_rules = st.builds(lambda m, r: RegexRule(match="^" + re.escape(m), replace=r),
                          st.sampled_from(ATOMS[:-1]), st.sampled_from(ATOMS))
rule_sets = st.builds(RuleSet, st.lists(st.one_of(literal_rules, st.sampled_from(REGEX_RULES)), max_size=4),
                      st.lists(st.sampled_from([r"^b\.", r"\.z$", r"^model\.x$"]), max_size=2))
name_sets = st.lists(st.builds(str.__add__, st.sampled_from(ATOMS), st.sampled_from(SUFFIXES)), unique=True,
                     min_size=1, max_size=12)


def reference_to_canonical(rules: RuleSet, name: str):
    if any(re.search(p, name) for p in rules.ignore):
        return None, None
    for i, rule in enumerate(rules.rules):
        if re.search(rule.match, name):
            return re.sub(rule.match, rule.replace, name, count=1), i
    return name, None


@given(rule_sets, name_sets)
@example(RuleSet([RegexRule(match=r"^a\.", replace="b."), REGEX_RULES[1]]), ["a.x"])   # an inverse beside none
def test_map_names_is_injective_or_names_every_collision(rules, names):
    canon = {n: reference_to_canonical(rules, n) for n in names}
    assert all(rules.to_canonical(n) == canon[n] for n in names)
    accepted = [n for n in names if canon[n][0] is not None]
    by_target: dict[str, list[str]] = {}
    for n in accepted:
        by_target.setdefault(canon[n][0], []).append(n)
    expected_pairs = {(frozenset(p), c) for c, ns in by_target.items() for p in itertools.combinations(ns, 2)}
    try:
        mapping = rules.map_names(names)
    except RemapCollision as exc:
        assert {(frozenset(p[:2]), p[2]) for p in exc.pairs} == expected_pairs
        assert expected_pairs
        for pair, _ in expected_pairs:
            assert all(repr(n) in str(exc) for n in pair)
    else:
        assert not expected_pairs
        assert sorted(src for src, _ in mapping.values()) == sorted(accepted)  # one canonical name per source
        assert all(canon[src] == (c, i) for c, (src, i) in mapping.items())
    for n in accepted:  # from_canonical gives a true preimage, and answers unless n's own rule has no inverse
        try:
            back = rules.from_canonical(canon[n][0])
        except ValueError:
            # n kept its name (it is its own preimage), or a rule with an inverse renamed it (its inverse gives n
            # back, or an earlier rule's a preimage): only a rule without an inverse leaves no answer
            assert canon[n][1] is not None and rules.rules[canon[n][1]].inverse is None
        else:
            assert rules.to_canonical(back)[0] == canon[n][0]


def test_a_rule_renames_the_first_occurrence_only():
    # re.sub(count=1): Mistral's `attention.wq` -> `q_proj` must not also rewrite a later `.wq` in the same name
    rule = RegexRule(match=r"\.wq", replace=".q_proj")
    assert rule.apply("layers.0.wq.wq") == "layers.0.q_proj.wq"
