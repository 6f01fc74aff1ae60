"""Kills for specs/translate.py survivors (mutation round 27b): problems_from(data=) walking an error's location
into the caller's data steps over a part that names no key (a union member's tag) without an error of its own."""
import pytest
import torch
from pydantic import ValidationError

from draftsmith.specs.schema import Draft, validate_strict
from draftsmith.specs.translate import problems_from


def _draft_problems(value):
    data = {"num_layers": value, "fusion": {"kind": "fc"}}
    with pytest.raises(ValidationError) as e:
        validate_strict(Draft, data)
    return problems_from(e.value, "draft", Draft, data=data)


def test_a_union_fields_value_that_is_not_plain_data_is_one_problem_said_as_given():
    """draft.num_layers is an integer or 'auto' (a union): pydantic's locations carry a member tag after the key
    (``('num_layers', 'constrained-int')``). translate._given steps over the tag, as no key of the data: a tag indexes
    no list (`isinstance(node, (list, tuple)) and isinstance(part, int) and 0 <= part < len(node)`; with `or` a str
    tag was compared with 0, a TypeError out of problems_from), and the tensor is said as the caller gave it, as a
    plain field's is (the walk stopped at the tag and said validate_strict's stand-in: round 27b's finding)."""
    [problem] = _draft_problems(torch.tensor(2))
    assert problem.path == "draft.num_layers"
    assert problem.message == "<tensor of shape [], int64> is not allowed", problem.message
    assert problem.allowed == "an integer or 'auto'"


def test_a_missing_key_under_a_union_member_it_cannot_name_is_said_without_a_crash():
    """A plugin's params may hold a model with a validator in a union (``Annotated[Span, AfterValidator(f)] |
    Literal['auto']``): pydantic tags that member ``function-after[f(), Span]``, which translate._member_for_tag does
    not name, so the walk past it knows no model (parent None). A key missing there is still one problem at its
    dotted path (translate._problem: `w.parent and w.path`; with `or` the missing field was looked up on None, an
    AttributeError out of problems_from)."""
    from typing import Annotated, Literal

    from pydantic import AfterValidator, BaseModel, ConfigDict

    class Span(BaseModel):
        model_config = ConfigDict(extra="forbid")
        start: int
        stop: int

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        span: Annotated[Span, AfterValidator(lambda s: s)] | Literal["auto"] = "auto"

    with pytest.raises(ValidationError) as e:
        validate_strict(Params, {"span": {"start": 1}})
    [problem] = problems_from(e.value, "draft.layer", Params)
    assert (problem.path, problem.message) == ("draft.layer.span.stop", "required field is missing")


def test_a_quoted_boolean_at_a_union_without_a_boolean_member_is_not_told_to_drop_the_quotes(tmp_path):
    """A union value that fits no member (problems_from's merged problem) is hinted true / false only where a member
    is bool (translate.problems_from: `w.member is bool`): draft.num_layers (an integer or 'auto') given "true" or
    flase gets no hint (unquoted, true is refused there too), while qkv_bias ('auto' or true / false) given "True" is
    told to drop the quotes. With `is not bool` every union offered true / false."""
    import draftsmith

    spec = tmp_path / "s.yaml"
    for value in ('"true"', "flase"):
        spec.write_text(f"name: t\nextends: eagle3-llama\ndraft: {{num_layers: {value}}}\n")
        with pytest.raises(draftsmith.SpecError) as info:
            draftsmith.load_spec(spec)
        [problem] = [p for p in info.value.problems if p.path == "draft.num_layers"]
        assert problem.allowed == "an integer or 'auto'"
        assert problem.hint.strip() == "", problem.hint
    spec.write_text('name: t\nextends: eagle3-llama\ndraft: {attention: {kind: gqa, qkv_bias: "True"}}\n')
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec(spec)
    [problem] = [p for p in info.value.problems if p.path == "draft.attention.qkv_bias"]
    assert problem.hint.strip() == "Write true without quotes (in quotes it is a string)", problem.hint


def test_a_missing_field_inside_a_nested_model_is_hinted_by_its_own_description():
    """A required field's description is the hint of its "required field is missing" (translate._problem): the
    field is looked up by the last key of the path (`w.path[-1]`), not the first, so one inside a nested model of a
    plugin's params (``inner.why``) keeps its description (with `w.path[0]` the lookup asked for ``inner`` on the
    inner model and the hint was lost; the built-in required fields sit at the top of their models, where both
    agree)."""
    from pydantic import BaseModel, ConfigDict, Field

    class Inner(BaseModel):
        model_config = ConfigDict(extra="forbid")
        why: int = Field(description="state it: the checkpoint cannot show it")

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        inner: Inner

    with pytest.raises(ValidationError) as e:
        validate_strict(Params, {"inner": {}})
    [problem] = problems_from(e.value, "draft.layer", Params)
    assert (problem.path, problem.message) == ("draft.layer.inner.why", "required field is missing")
    assert problem.allowed == "an integer"
    assert problem.hint == "state it: the checkpoint cannot show it", problem.hint
