"""Kills for specs/translate.py survivors (mutation round 27): the quoted-boolean hint is for a field that takes a
boolean only, and a value that is not plain data is said as given wherever problems_from(data=) finds its stand-in
(an item of a list included, the first item too)."""
import pytest
import torch
from pydantic import ValidationError

import draftsmith
from draftsmith.specs.schema import Weights, validate_strict
from draftsmith.specs.translate import problems_from


def test_a_quoted_true_where_no_boolean_goes_is_not_told_to_drop_the_quotes(tmp_path):
    """"Write true without quotes" is for a field that takes true / false: for a field of string literals a quoted
    true / false gets no hint (unquoted it is refused too), and a cased literal ('AUTO') gets the literal's spelling,
    not "Write auto without quotes" (translate._suggest's `and`: with `or` every such value was told to unquote)."""
    spec = tmp_path / "s.yaml"
    spec.write_text('name: t\nextends: eagle3-llama\ndecoding: {mode: AUTO, linear: "true", draft_dtype: "False"}\n')
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec(spec)
    hints = {p.path: p.hint.strip() for p in info.value.problems}
    assert hints == {"decoding.mode": "Did you mean 'auto'?", "decoding.linear": "", "decoding.draft_dtype": ""}, hints
    assert "without quotes" not in str(info.value)


@pytest.mark.parametrize("items, at", [([torch.tensor(1)], 0), (["a", torch.tensor(1)], 1)])
def test_a_value_that_is_not_plain_data_in_a_list_is_said_as_given_at_any_index(items, at):
    """problems_from(data=) walks the error's location into a list (translate._given): the item at index 0 is as
    reachable as a later one (`0 <= part < len(node)`), so a tensor is said as the tensor, not as the stand-in dict
    validate_strict put in its place."""
    data = {"ignore": items}
    with pytest.raises(ValidationError) as e:
        validate_strict(Weights, data)
    [problem] = problems_from(e.value, "weights", Weights, data=data)
    assert problem.path == f"weights.ignore.{at}"
    assert problem.message == "<tensor of shape [], int64> is not allowed", problem.message
    assert problem.allowed == "a string"


def test_a_value_holding_something_not_plain_data_is_said_as_given():
    """A tensor inside a list or a mapping was said with validate_strict's stand-in in its place ("topk:
    [{'<not plain data>': 'Tensor'}] is not allowed"): the whole value is said as the caller gave it."""
    from draftsmith.decoding.arguments import overridden
    from draftsmith.specs.resolve import decoding_section_problems
    from draftsmith.specs.schema import Decoding

    problems: list[str] = []
    overridden(Decoding(), {"topk": [torch.tensor(3)]}, problems, draft_vocab=100)
    assert problems[0].startswith("topk: [<tensor of shape [], int64>] is not allowed"), problems
    section = Decoding.model_construct(**{**Decoding().model_dump(), "mode": {"a": torch.tensor(1)}})
    assert decoding_section_problems(section)[0].message == "{'a': <tensor of shape [], int64>} is not allowed"
