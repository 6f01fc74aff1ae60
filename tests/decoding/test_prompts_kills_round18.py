"""Mutation round 18 (decoding/prompts.py): a list of one 0-D tensor or array (list() of a one-id 1-D tensor) is said
as the 0-D-list problem (a tensor by a torch item, an array by a numpy one), not an IndexError."""
import numpy as np
import torch

from draftsmith.decoding.prompts import encode_prompts


def problems(prompt) -> list[str]:
    out: list[str] = []
    encode_prompts(prompt, tokenizer=None, vocab=32, context=8, problems=out)
    return out


def test_a_list_of_one_0d_tensor_is_said_as_a_list_of_0d_tensors():
    assert problems(list(torch.tensor([5]))) == [
        "prompt: a list of 1 0-D tensors (list() of a 1-D tensor gives one per id); pass the 1-D tensor itself, "
        "or its .tolist()"]


def test_a_list_of_one_0d_array_is_said_as_a_list_of_0d_arrays():
    (one,) = problems([np.array(5)])
    assert one.startswith("prompt: a list of 1 0-D arrays (list() of a 1-D array gives one per id)")


def test_the_kind_of_a_0d_list_is_read_off_its_first_item():
    assert problems([torch.tensor(1), np.array(2)])[0].startswith("prompt: a list of 2 0-D tensors")
    assert problems([np.array(1), torch.tensor(2)])[0].startswith("prompt: a list of 2 0-D arrays")
