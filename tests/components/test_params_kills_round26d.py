"""Mutation survivors of draftsmith.components.params (round 26d: GQAParams.rope_theta's bounds, planted by hand since
mutate.py skips annotations, and gqa_reads): a spec's rope_theta is refused unless it is auto, 10000 or a finite
number above 0, each refusal naming the bound it breaks; gqa_reads takes the top level's rope_theta where
rope_parameters is no mapping."""
import math

import pytest
from pydantic import ValidationError

import draftsmith
from draftsmith.components.params import GQAParams, gqa_reads
from draftsmith.errors import SpecError


# catches params.py:33 Field(gt=0) -> ge=0 and -> no bound (0 and negative bases accepted: 0 ** exps divides by
# zero, a negative base makes NaN frequencies), allow_inf_nan=False -> True (an infinite base rotates nothing)
@pytest.mark.parametrize("value", [0, 0.0, -1, -10000.0, math.inf, -math.inf, math.nan])
def test_a_rope_theta_that_is_no_positive_finite_number_is_refused(value):
    """GQAParams refuses a base of 0, a negative one, infinity and NaN (a pydantic ValidationError)."""
    with pytest.raises(ValidationError):
        GQAParams(rope_theta=value)


@pytest.mark.parametrize("value, said", [("0", "a number > 0.0"), ("-5.0", "a number > 0.0"),
                                         (".inf", "a finite number"), (".nan", "a finite number")])
def test_a_spec_s_rope_theta_out_of_bounds_is_a_spec_error_naming_the_bound(tmp_path, value, said):
    """From a spec file: SpecError at the field's path and line, listing what is allowed (auto, 10000, and the bound
    the value breaks)."""
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: s\nextends: eagle3-llama\ndraft:\n  attention: {{kind: gqa, rope_theta: {value}}}\n")
    with pytest.raises(SpecError) as err:
        draftsmith.load_spec(str(spec))
    text = str(err.value)
    assert f"draft.attention.rope_theta: {value} is not allowed (line 4)" in text, text
    assert f"allowed: 'auto' or 10000 or {said}" in text, text


@pytest.mark.parametrize("value, kept", [("auto", "auto"), (10000, 10000), (10000.0, 10000), (1e-3, 1e-3),
                                         (5e5, 5e5)])
def test_auto_10000_and_any_positive_finite_base_are_kept(value, kept):
    """The allowed values pass unchanged (10000.0 reads as the literal 10000; a small positive base is a base)."""
    assert GQAParams(rope_theta=value).rope_theta == kept
    assert GQAParams().rope_theta == "auto"


# catches params.py:39 isinstance(rope, Mapping) dropped (rope.get on a list: AttributeError)
@pytest.mark.parametrize("rope", [["default"], "default", 7])
def test_gqa_reads_takes_the_top_level_theta_beside_rope_parameters_that_are_no_mapping(rope):
    """rope_parameters that are no mapping hold no theta: the top level's is read (and nothing when it has none),
    rather than an AttributeError out of doctor or convert."""
    assert gqa_reads(None, {"rope_parameters": rope, "rope_theta": 5e5}) == {"rope_theta": 5e5}
    assert gqa_reads(None, {"rope_parameters": rope}) == {}
