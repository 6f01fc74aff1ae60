"""A weight rule that is not a mapping (`rules: [5]`, `rules: ['x']`) is refused listing every rule kind's keys and
forms, the text a `rules` that is not a list gets (schema.rule_forms; pinned in test_spec_errors.py): the list and
its items read alike, from one text."""
import copy

import pytest
from pydantic import ValidationError

import draftsmith
from draftsmith.specs.loader import parse_spec
from draftsmith.specs.schema import Spec, Weights, rule_forms, validate_strict
from draftsmith.specs.translate import describe, problems_from

ITEM = ("a mapping with keys kind, match, replace, inverse, into: {match, replace, inverse} (kind: regex, the "
        "default); {kind: split, match, into}")


def test_the_rules_list_and_its_items_are_described_by_one_text():
    assert describe(Weights.model_fields["rules"].annotation) == rule_forms() == f"a list, each item {ITEM}"


@pytest.mark.parametrize("item", [5, "x", None, [1]])
def test_a_rule_that_is_not_a_mapping_lists_the_rule_keys(base, item):
    data = copy.deepcopy(base)
    data["weights"]["rules"] = [item]
    with pytest.raises(ValidationError) as info:
        validate_strict(Spec, data)
    assert [(p.path, p.allowed) for p in problems_from(info.value, "", Spec)] == [("weights.rules.0", ITEM)]


@pytest.mark.parametrize("item", [5, "x"])
def test_a_spec_given_as_python_data_says_so_when_it_loads(base, registry, item):
    """Rules as a tuple (what ``Spec.model_dump()`` gives) are checked as a YAML list is: the same problems (the
    spec-data check read only lists, so a tuple's rule with kind 'regx' or match 3 passed it)."""
    said = []
    for rules in ([item], (item,)):
        data = copy.deepcopy(base)
        data["weights"]["rules"] = rules
        with pytest.raises(draftsmith.SpecError) as info:
            parse_spec(data, source="d.yaml", registry=registry)
        said.append([(p.path, p.message, p.allowed) for p in info.value.problems])
    assert said[0] == said[1] and said[0][0][0] == "weights.rules.0"


def test_a_tuple_of_rules_is_checked_as_a_list_is(base, registry):
    data = copy.deepcopy(base)
    data["weights"]["rules"] = ({"kind": "regx", "match": "a", "replace": "b"},)
    with pytest.raises(draftsmith.SpecError, match="regx"):
        parse_spec(data, source="d.yaml", registry=registry)