"""A number given as a 0-d tensor or numpy array (``torch.tensor(0.7)``, ``logits.max()``, ``np.array(6)``) is that
number in generate(), generate_baseline(), plan() and Spec.with_decoding(): they were refused as "<tensor of shape
[]>" while numpy scalars were accepted (a walk-through, 2026-12-01). A 0-d bool is still no count, a 1-D tensor or
a meta tensor still no number."""
import re

import numpy as np
import pytest
import torch

import draftsmith
from draftsmith.values import scalar
from draftsmith.errors import ArgumentError


@pytest.fixture(scope="module")
def demo():
    return draftsmith.assemble("demo")


KW = dict(max_new_tokens=10, temperature=0.7, top_p=0.9, top_k=5, seed=3, stop=[])


@pytest.mark.parametrize("wrap", [torch.tensor, np.array], ids=["tensor", "ndarray"])
def test_zero_d_sampling_settings_sample_as_the_numbers(demo, wrap):
    want = demo.generate([3, 1, 4], **KW).token_ids
    given = {k: wrap(v) if k != "stop" else v for k, v in KW.items()}
    assert demo.generate([3, 1, 4], **given).token_ids == want
    assert demo.generate_baseline([3, 1, 4], **given).token_ids == demo.generate_baseline([3, 1, 4], **KW).token_ids


def test_zero_d_tree_overrides_plan_as_the_ints(demo):
    assert demo.plan(topk=torch.tensor(2), steps=np.array(3)) == demo.plan(topk=2, steps=3)
    spec = draftsmith.load_spec("demo").with_decoding(topk=torch.tensor(2), steps=np.array(3))
    assert (spec.decoding.topk, spec.decoding.steps) == (2, 3) and type(spec.decoding.topk) is int


@pytest.mark.parametrize("bad, said", [(torch.tensor(True), "max_new_tokens is <tensor of shape [], bool>"),
                                       (torch.tensor([6]), "max_new_tokens is <tensor of shape [1]"),
                                       (torch.tensor(6, device="meta"), "max_new_tokens is <tensor of shape []")])
def test_what_is_no_count_stays_refused(demo, bad, said):
    with pytest.raises(ArgumentError, match=re.escape(said) + r".*an integer in 1\.\."):
        demo.generate([3, 1, 4], max_new_tokens=bad)


def test_scalar_gives_python_numbers():
    assert type(scalar(torch.tensor(4, dtype=torch.uint8))) is int and scalar(np.array(2.5)) == 2.5
    assert scalar("v2") == "v2" and scalar(None) is None
