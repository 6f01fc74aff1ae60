"""generate()'s arguments, from a hunt of the Python API (round 24): a prompt tensor on the meta device was torch's
NotImplementedError; a call's cross-field refusal named a value the caller never gave (steps=1 alone: "draft_tokens:
8 tokens cannot be drafted") without saying it is the spec's; numpy's float16 temperature warned of an overflow."""
import warnings

import numpy as np
import pytest
import torch

import draftsmith
from draftsmith.errors import ArgumentError


@pytest.fixture(scope="module")
def model():
    return draftsmith.assemble("demo")


def test_a_meta_tensor_prompt_is_refused_as_the_prompts_problem(model):
    with pytest.raises(ArgumentError, match="prompt: a tensor on the meta device, which holds no values"):
        model.generate(torch.tensor([1, 2, 3], device="meta"), max_new_tokens=2)


def test_a_value_the_call_left_as_the_spec_has_it_is_said_so(model):
    with pytest.raises(ArgumentError) as info:
        model.generate([1, 2, 3], max_new_tokens=2, steps=1)
    assert info.value.problems[0].startswith("draft_tokens: 8 tokens cannot be drafted with topk=4, steps=1 (8: the "
                                             "spec's draft_tokens; pass draft_tokens too)"), info.value.problems
    with pytest.raises(ArgumentError) as info:   # given, it is the caller's: no note
        model.generate([1, 2, 3], max_new_tokens=2, steps=1, draft_tokens=8)
    assert "the spec's" not in str(info.value)


def test_a_numpy_float16_temperature_warns_of_nothing(model):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(model.generate([1, 2, 3], max_new_tokens=2, temperature=np.float16(2.0), seed=1).token_ids) == 2
