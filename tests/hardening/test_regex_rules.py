"""Weight rules are user regexes over user tensor names: refused at validation or stopped by a timeout."""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import draftsmith
from draftsmith import limits
from draftsmith.components.weights import RegexRule, RegexTimeout, RuleSet, pattern_problem
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.errors import SpecError

from hardening_helpers import quick, refused

BASE = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"^(?:x*)*y", r"((ab)+)*c", r"(?:(a|b)+)+$", r"(\d+)*\.",
                                     # inside a repeat, a branch, a lookahead, a group
                                     r"(?:ab(c+)+){2}d", r"x|(?:y(z*)*)", r"(?=(a+)+)b", r"x((a+)+)y"])
def test_a_repeat_of_a_repeat_is_refused_when_the_spec_is_validated(pattern):
    assert pattern_problem(pattern) is not None
    for where, data in [("weights.rules.0.match", {**BASE, "weights": {"rules": [{"match": pattern, "replace": "x"}]}}),
                        ("weights.ignore.0", {**BASE, "weights": {"ignore": [pattern]}})]:
        with refused(kind=SpecError) as r:
            draftsmith.parse_spec(data, source="rules.yaml")
        assert [p.path for p in r.value.problems] == [where] and "repeat of a repeat" in str(r.value)


@pytest.mark.parametrize("pattern", [r"^midlayer\.", r"^(model\.)?layers\.(\d+)\.", r"(?:\w+\.)+weight$",
                                     r"^layers\.\d+\.(q|k|v)_proj", r"x{2,}", r"^$"])
def test_ordinary_patterns_pass(pattern):
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize("pattern, name", [(r"^(a|aa)+$", "a" * 60 + "b"), (r"^(a|a)*$", "a" * 40 + "!"),
                                           (r"^(.|..)*w$", "layers.0.post_attention_layernorm.weight")])
def test_catastrophic_patterns_that_pass_validation_time_out_naming_rule_and_name(pattern, name):
    assert pattern_problem(pattern) is None  # overlapping alternatives: only the timeout stops these
    rules = RuleSet([RegexRule(match=pattern, replace="x")])
    with refused(kind=RegexTimeout) as r:
        rules.to_canonical(name)
    assert pattern[:10] in str(r.value) and "catastrophic backtracking" in str(r.value)
    with refused(kind=RegexTimeout):
        RuleSet([], ignore=[pattern]).remap(["fine", name])


def test_a_timeout_in_assembly_is_a_draftsmith_error(tiny_pair):
    data = {**BASE, "name": "slow", "weights": {**BASE["weights"], "ignore": [r"^(.|..)*w$"]}}
    spec = draftsmith.parse_spec(data, source="slow.yaml")
    with refused(seconds=limits.REGEX_SECONDS * 10, kind=RegexTimeout):
        draftsmith.assemble(spec, target=tiny_pair[0], draft=tiny_pair[1])


def test_overlong_patterns_are_refused():
    assert "at most" in pattern_problem("a" * (limits.REGEX_CHARS + 1))
    assert pattern_problem("a" * limits.REGEX_CHARS) is None            # the limit itself is allowed


def test_an_overlong_pattern_is_refused_before_anything_compiles_it(monkeypatch):
    # re.compile of a 100k-character pattern takes ~0.2 s; twelve distinct ones took seconds before the length
    # refused them. Validation must measure a pattern before it parses or compiles it
    import re
    import re._parser

    seen = []
    for module, name in [(re, "compile"), (re._parser, "parse")]:
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda p, *a, _real=real, **k: (seen.append(len(p)), _real(p, *a, **k))[1])
    long = [chr(97 + i) * (limits.REGEX_CHARS + 1) for i in range(3)]
    data = {**BASE, "weights": {"rules": [{"match": long[0], "replace": "x"}], "ignore": long[1:]}}
    with refused(kind=SpecError) as r:
        draftsmith.parse_spec(data, source="long.yaml")
    assert [p.path for p in r.value.problems] == ["weights.rules.0.match", "weights.ignore.0", "weights.ignore.1"]
    assert all("at most" in p.message for p in r.value.problems)
    assert max(seen, default=0) <= limits.REGEX_CHARS


@pytest.mark.filterwarnings("ignore::FutureWarning")  # re's "possible nested set" on generated patterns
@settings(max_examples=60)
@given(st.text(st.sampled_from(list("a()|*+?{}[]\\.^$,1w")), max_size=14))
def test_any_pattern_is_refused_or_matches_quickly(pattern):
    with quick():
        try:
            rule = RegexRule(match=pattern, replace="")
        except ValueError:
            return
        try:
            RuleSet([rule]).remap(["a" * 30 + "b", "layers.0.weight", "w" * 30])
        except RegexTimeout:
            pass
