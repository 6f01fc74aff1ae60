"""list(ids_tensor) (a list of 0-D tensors) is said in one problem naming the fix, not as a batch of one-token
prompts each refused (1000 ids: 60 lines and '... and 940 more'); found by a dogfooding helper."""
import pytest
import torch

import draftsmith
from draftsmith.errors import ArgumentError


@pytest.fixture(scope="module")
def model():
    return draftsmith.assemble("demo")


def test_a_list_of_0d_tensors_is_one_problem(model):
    with pytest.raises(ArgumentError) as info:
        model.generate(list(torch.tensor([1, 2, 3] * 300)), max_new_tokens=2)
    assert str(info.value).splitlines()[1:] == ["  prompt: a list of 900 0-D tensors (list() of a 1-D tensor gives "
                                                "one per id); pass the 1-D tensor itself, or its .tolist()"]


def test_a_batch_holding_one_0d_tensor_is_still_said_per_prompt(model):
    with pytest.raises(ArgumentError) as info:
        model.generate([torch.tensor(1), [1, 2]], max_new_tokens=2)
    assert "prompt 0: a 0-D tensor of shape []; a prompt is 1-D" in str(info.value)
