"""Kills for specs/schema.py survivors (round 22): validate_strict's second pass (data holding an integer Python
will not print), where _printable must keep every other value in its place and a NaN beside the integer must
still be validated, not raised as json's ValueError."""
import math

import pytest
from pydantic import ValidationError

from draftsmith.errors import short
from draftsmith.specs.schema import Decoding, Weights, validate_strict

HUGE = 10 ** 5000   # past Python's 4300-digit str() limit: json.dumps refuses it, so the _printable pass runs


def test_an_unprintable_integer_is_refused_at_its_own_field_with_the_others_kept_in_place():
    """Only the huge integer becomes its description: the mapping around it is still a mapping (the field named,
    the value said as the description), and the fields beside it are still validated as given."""
    with pytest.raises(ValidationError) as e:
        validate_strict(Decoding, {"topk": HUGE, "steps": 3, "mode": "v3"})
    found = {err["loc"]: err["input"] for err in e.value.errors()}
    assert found == {("topk",): short(HUGE), ("mode",): "v3"}


def test_a_value_that_contains_itself_beside_an_unprintable_integer_is_said_there_alone():
    """A list holding itself is described where it is held (one level down), not at the top of the data; the
    integer's description is a string, so as a string item it passes."""
    looped = ["a"]
    looped.append(looped)
    with pytest.raises(ValidationError) as e:
        validate_strict(Weights, {"ignore": [looped, HUGE]})
    found = {err["loc"]: err["input"] for err in e.value.errors()}
    assert found == {("ignore", 0): ["a", "<the value contains itself>"]}


def test_a_nan_beside_an_unprintable_integer_is_a_validation_error_not_a_value_error():
    """The second json.dumps allows NaN as the first does: NaN with a huge integer raised json's ValueError ("Out of
    range float values are not JSON compliant") out of validate_strict, past every caller's ValidationError."""
    with pytest.raises(ValidationError) as e:
        validate_strict(Decoding, {"topk": HUGE, "steps": math.nan})
    assert {err["loc"] for err in e.value.errors()} == {("topk",), ("steps",)}


def test_one_rule_written_with_every_rule_key_and_no_list_gets_the_one_rule_hint():
    """The 'one rule' hint is for a mapping whose keys are all rule keys, all of them included (a subset, not a
    strict one): such a mapping is not read as an old-name -> new-name table."""
    from draftsmith.errors import SpecError
    from draftsmith.specs.loader import parse_spec

    rule = {"kind": "split", "match": "^a", "replace": "b", "inverse": "c", "into": ["x", "y"]}
    with pytest.raises(SpecError) as e:
        parse_spec({"name": "x", "draft": {"fusion": {"kind": "eagle1"}}, "weights": {"rules": rule}},
                   source="x.yaml")
    [problem] = e.value.problems
    assert problem.path == "weights.rules"
    assert problem.allowed.endswith("; for this one rule, in a list: rules: [{kind: 'split', match: '^a', "
                                    "replace: 'b', inverse: 'c', into: ['x', 'y']}]"), problem.allowed


def test_the_decoding_defaults_are_the_readmes():
    """README: decoding: {topk: 4, steps: 5, draft_tokens: 8, page_size: 1, mode: auto, draft_dtype: same, linear:
    auto}; a spec that leaves the section out gets exactly these."""
    got = validate_strict(Decoding, {}).model_dump()
    assert {k: got[k] for k in ("topk", "steps", "draft_tokens", "page_size", "mode", "draft_dtype", "linear")} == {
        "topk": 4, "steps": 5, "draft_tokens": 8, "page_size": 1, "mode": "auto", "draft_dtype": "same",
        "linear": "auto"}


def test_every_section_of_a_spec_is_frozen_the_open_ones_too():
    """A validated spec is not changed in place: the sections that forbid unknown keys, and those that keep them
    (a component reference, a rule, quant), refuse assignment alike."""
    from draftsmith.specs.schema import Spec

    spec = validate_strict(Spec, {"name": "x", "draft": {"fusion": {"kind": "eagle1", "width": 3}},
                                  "weights": {"rules": [{"match": "^a", "replace": "b"}]},
                                  "quant": {"method": "fp8", "block": 128}})
    for obj, field in [(spec, "name"), (spec.decoding, "topk"), (spec.draft, "feed_back"),
                       (spec.draft.fusion, "kind"), (spec.weights.rules[0], "kind"), (spec.quant, "method")]:
        with pytest.raises(ValidationError, match="frozen"):
            setattr(obj, field, getattr(obj, field))
    assert spec.draft.fusion.params == {"width": 3} and spec.quant.model_extra == {"block": 128}


def test_the_draft_section_defaults():
    """norms: input all, hidden auto, final true; vocab: reduced auto, d2t offset; share: embed and lm_head from the
    target (README's draft section)."""
    from draftsmith.specs.schema import Draft

    draft = validate_strict(Draft, {"fusion": {"kind": "eagle1"}}).model_dump()
    assert draft["norms"] == {"input": "all", "hidden": "auto", "final": True}
    assert draft["vocab"] == {"reduced": "auto", "d2t": "offset"}
    assert draft["share"] == {"embed": "target", "lm_head": "target"}


def test_extends_is_a_non_empty_name_and_is_not_dumped():
    """'' would name the spec's own folder; the merged spec is what is kept, so extends is left out of a dump."""
    from draftsmith.specs.schema import Spec

    base = {"name": "x", "draft": {"fusion": {"kind": "eagle1"}}}
    with pytest.raises(ValidationError) as e:
        validate_strict(Spec, {**base, "extends": ""})
    assert [err["loc"] for err in e.value.errors()] == [("extends",)]
    spec = validate_strict(Spec, {**base, "extends": "b"})
    assert spec.extends == "b" and "extends" not in spec.model_dump()


def test_the_summary_says_extends_only_when_there_is_one():
    from draftsmith.specs.schema import Spec

    base = {"name": "x", "description": "a draft", "draft": {"fusion": {"kind": "eagle1"}}}
    assert validate_strict(Spec, base).summary == "a draft"
    assert validate_strict(Spec, {**base, "extends": "b"}).summary == "a draft (extends b)"
    assert validate_strict(Spec, {**base, "description": "", "extends": "b"}).summary == "(extends b)"


def _rules_allowed(rules) -> str:
    from draftsmith.errors import SpecError
    from draftsmith.specs.loader import parse_spec

    with pytest.raises(SpecError) as e:
        parse_spec({"name": "x", "draft": {"fusion": {"kind": "eagle1"}}, "weights": {"rules": rules}},
                   source="x.yaml")
    return e.value.problems[0].allowed.split("{kind: split, match, into}")[1]


def test_a_table_hint_shows_three_rules_and_dots_only_past_three():
    three = {"a.": "b", "c": "d", "e": "f"}
    rules = "{match: '^a\\.', replace: 'b'}, {match: '^c', replace: 'd'}, {match: '^e', replace: 'f'}"
    assert _rules_allowed(three) == f"; for this table: rules: [{rules}]"
    assert _rules_allowed({**three, "g": "h"}) == f"; for this table: rules: [{rules}, ...]"


@pytest.mark.parametrize("rules", ["abc", {"a": 1}, {"a": ["b"]}])
def test_no_table_hint_for_a_string_or_a_mapping_with_a_value_that_is_no_string(rules):
    """Only a mapping of strings to strings reads as an old-name -> new-name table; a plain string is just refused."""
    assert _rules_allowed(rules) == ""
