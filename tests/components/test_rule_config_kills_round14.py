"""``${key}`` placeholders bound from the draft's config.json (draftsmith.components.rule_config), as its docstring
says: the value is regex-escaped in patterns and literal in replacements, a rule whose every text holds a
placeholder is bound too, a literal-prefix rule gets its inverse once bound, and a bound ignore pattern that is no
longer a valid pattern is a problem at its dotted path (weights.ignore.N), never a pattern that matches nothing."""
import pytest

from draftsmith import limits
from draftsmith.components.rule_config import UnboundRules, bind, bind_all, bind_rule
from draftsmith.components.split_rule import SplitRule
from draftsmith.components.weights import RegexRule, RuleSet


# catches rule_config.py:23 PLACEHOLDER.search(text) is not None -> is None
def test_a_rule_whose_every_text_holds_a_placeholder_is_bound():
    """Match and replace both name ${n}: no text is placeholder-free, so nothing may be left unbound."""
    rule = RegexRule(match=r"^blocks\.${n}\.", replace="layers.${n}.")
    bound = bind_rule(rule, {"n": 7})
    assert (bound.match, bound.replace) == (r"^blocks\.7\.", "layers.7.")
    assert RuleSet([bound]).to_canonical("blocks.7.fc.weight")[0] == "layers.7.fc.weight"
    split = SplitRule(match=r"^model\.${n}\.qkv\.", into=["q.${n}.", "k.${n}."])
    assert bind_rule(split, {"n": 2}).parts("model.2.qkv.weight") == ("q.2.weight", "k.2.weight")


# catches rule_config.py:57 bind(rule.match, config, pattern=True) -> pattern=False
# catches rule_config.py:58 bind(t, config, pattern=False) -> pattern=True
def test_a_split_rule_binds_its_match_as_a_pattern_and_its_parts_as_replacements():
    split = bind_rule(SplitRule(match=r"^model\.${n}\.qkv\.", into=["q.${n}.", "k.${n}."]), {"n": "1.5"})
    assert split.parts("model.1.5.qkv.weight") == ("q.1.5.weight", "k.1.5.weight")
    assert split.parts("model.1x5.qkv.weight") is None


# catches rule_config.py:23 PLACEHOLDER.search(text) is not None -> is None (the placeholder-free rule kept as is)
def test_a_rule_without_placeholders_is_returned_as_it_is():
    rule = RegexRule(match=r"^midlayer\.", replace="layers.0.")
    assert bind_rule(rule, {"n": 1}) is rule
    assert bind_rule("not a rule", {}) == "not a rule"


# catches rule_config.py:64 rule.inverse is None -> is not None (an explicit inverse is bound, not dropped)
def test_an_explicit_inverse_is_bound_with_the_rule():
    rule = RegexRule(match=r"^model\.layers\.${n}\.(enorm|hnorm)\.", replace=r"fc.\1.",
                     inverse=(r"^fc\.(enorm|hnorm)\.", r"model.layers.${n}.\1."))
    bound = bind_rule(rule, {"n": 3})
    assert bound.inverse == (r"^fc\.(enorm|hnorm)\.", r"model.layers.3.\1.")
    assert RuleSet([bound]).from_canonical("fc.hnorm.weight") == "model.layers.3.hnorm.weight"


# catches rule_config.py:64 bind(rule.inverse[0], config, pattern=True) -> pattern=False
# catches rule_config.py:65 bind(rule.inverse[1], config, pattern=False) -> pattern=True
def test_an_inverse_is_bound_as_a_pattern_and_a_replacement():
    """The inverse's match is a pattern (the value escaped), its replace a template (the value literal)."""
    rule = RegexRule(match=r"^model\.${v}\.(x|y)\.", replace=r"\1.${v}.",
                     inverse=(r"^(x|y)\.${v}\.", r"model.${v}.\1."))
    bound = bind_rule(rule, {"v": "1.5"})
    assert bound.inverse == (r"^(x|y)\.1\.5\.", r"model.1.5.\1.")
    assert RuleSet([bound]).from_canonical("y.1.5.w") == "model.1.5.y.w"


def test_a_rule_that_becomes_a_literal_prefix_once_bound_gets_its_inverse():
    """Unbound, '${n}' reads as an anchor and braces: no literal prefix, no inverse; bound, it is one."""
    rule = RegexRule(match=r"^model\.layers\.${n}\.", replace="layers.0.")
    assert rule.inverse is None
    bound = bind_rule(rule, {"n": 5})
    assert RuleSet([bound]).from_canonical("layers.0.mlp.weight") == "model.layers.5.mlp.weight"


# catches rule_config.py:66 bind(rule.match, config, pattern=True) -> pattern=False
# catches rule_config.py:66 bind(rule.replace, config, pattern=False) -> pattern=True
# catches rule_config.py:96 bind(p, config, pattern=True) -> pattern=False (an ignore pattern is a pattern)
def test_a_bound_value_is_escaped_in_patterns_and_literal_in_replacements():
    assert bind(r"^a\.${v}\.", {"v": "1.5"}, pattern=True) == r"^a\.1\.5\."
    (rule,), (ignore,) = bind_all([RegexRule(match=r"^x\.${v}\.", replace=r"y.${w}.")], [r"^z\.${v}$"],
                                  {"v": "1.5", "w": r"a(1)+b"})
    rules = RuleSet([rule], [ignore])
    assert rules.to_canonical("x.1.5.weight")[0] == r"y.a(1)+b.weight"   # literal, no group
    with pytest.raises(UnboundRules, match="it writes a backslash into the names"):   # no tensor name holds one
        bind_all([RegexRule(match=r"^x\.", replace=r"y.${w}.")], [], {"w": r"a\1.b"})
    assert rules.to_canonical("x.1x5.weight")[0] == "x.1x5.weight"     # the dot is escaped: no wildcard
    assert rules.is_ignored("z.1.5") and not rules.is_ignored("z.105")


# catches rule_config.py:37 not isinstance(v, bool) -> isinstance(v, bool)
# catches rule_config.py:37 ... and not isinstance(v, bool) -> or
def test_a_missing_key_lists_the_integer_and_string_keys_the_config_has():
    config = {"num_layers": 2, "name": "x", "flag": False, "ratio": 0.5, "ids": [1], "gone": None}
    with pytest.raises(UnboundRules) as err:
        bind_all([RegexRule(match=r"^a\.${num_hidden_layers}\.", replace="b.")], [], config)
    (problem,) = err.value.problems
    assert problem.path == "weights.rules.0" and "has no 'num_hidden_layers'" in problem.message
    assert problem.allowed == "'name', 'num_layers'"


# catches rule_config.py:86 e.key not in config -> e.key in config
def test_a_key_held_as_a_non_scalar_is_named_with_what_the_config_holds():
    with pytest.raises(UnboundRules) as err:
        bind_all([], [r"^a\.${n}\."], {"n": [1, 2], "m": 3})
    (problem,) = err.value.problems
    assert problem.path == "weights.ignore.0"
    assert "holds [1, 2] at 'n', not an integer or string" in problem.message
    assert "has no" not in problem.message


def test_a_config_with_no_bindable_key_says_so():
    with pytest.raises(UnboundRules) as err:
        bind_all([], [r"^a\.${n}\."], {"flag": True})
    assert err.value.problems[0].allowed == "no key holds one"


# catches rule_config.py:98 p is not None -> p is None (a bound ignore pattern is checked too)
# catches rule_config.py:98 (why := pattern_problem(p)) is not None -> is None
def test_an_ignore_pattern_the_bound_value_makes_too_long_is_refused_at_its_path():
    """Escaping keeps a bound value from breaking the syntax, but not from passing the length bound."""
    long = "a" * limits.REGEX_CHARS
    with pytest.raises(UnboundRules) as err:
        bind_all([], [r"^ok\.${n}\.", r"^x\.${v}\."], {"n": 1, "v": long})
    (problem,) = err.value.problems
    assert problem.path == "weights.ignore.1" and "refused" in problem.message
    assert f"at most {limits.REGEX_CHARS}" in problem.message


def test_a_rule_the_bound_value_makes_too_long_is_refused_at_its_path():
    long = "a" * limits.REGEX_CHARS
    with pytest.raises(UnboundRules) as err:
        bind_all([RegexRule(match=r"^m\.", replace="n."), RegexRule(match=r"^x\.${v}\.", replace="y.")], [],
                 {"v": long})
    (problem,) = err.value.problems
    assert problem.path == "weights.rules.1" and "bound to the draft's config it is refused" in problem.message
    # the rule's own words, not pydantic's dump of it (its header, the input again, a link, cut off mid-way)
    assert f"a pattern of {limits.REGEX_CHARS + 6} characters; at most {limits.REGEX_CHARS}" in problem.message
    assert "validation error" not in problem.message and "pydantic.dev" not in problem.message


def test_every_unbindable_item_is_one_problem():
    with pytest.raises(UnboundRules) as err:
        bind_all([RegexRule(match=r"^x\.${a}\.", replace="y.")], [r"^${b}", r"^ok"], {"c": 1})
    assert [p.path for p in err.value.problems] == ["weights.rules.0", "weights.ignore.0"]


# catches rule_config.py:90 short_list(keys, 30, 600) -> short_list(keys, 29, 600)
# catches rule_config.py:90 short_list(keys, 30, 600) -> short_list(keys, 31, 600)
def test_the_keys_a_config_has_are_listed_up_to_thirty_and_the_rest_counted():
    """The allowed list stays readable for a config of hundreds of keys (a bounded message)."""
    def allowed(n):
        with pytest.raises(UnboundRules) as err:
            bind_all([], [r"^${n}"], {f"key_{i:02}": i for i in range(n)})
        return err.value.problems[0].allowed
    assert all(f"'key_{i:02}'" in allowed(30) for i in range(30)) and "more" not in allowed(30)
    assert allowed(31).endswith("'key_29' and 1 more") and "'key_30'" not in allowed(31)


def test_a_literal_prefix_rule_with_a_placeholder_in_its_replace_inverts_to_the_bound_value():
    """bind_rule's docstring: the inverse is derived again when the bound rule is a literal prefix rename; the same
    rule written with the value (no placeholder) inverts layers.3. back to midlayer."""
    bound = bind_rule(RegexRule(match=r"^midlayer\.", replace="layers.${n}."), {"n": 3})
    assert RuleSet([bound]).to_canonical("midlayer.fc.weight")[0] == "layers.3.fc.weight"
    assert RuleSet([bound]).from_canonical("layers.3.fc.weight") == "midlayer.fc.weight"
