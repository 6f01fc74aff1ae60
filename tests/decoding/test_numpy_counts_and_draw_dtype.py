"""Two things a user of the Python API found (2026-11-30): a numpy max_new_tokens passed the checks and then broke
the pool sizing (np.int64 has no bit_length past 64 slots; np.uint8 wrapped, so the pools were too small and a call
failed mid-decode), and the sampling draws followed torch's default dtype (bfloat16: a grid 1/256 apart, biased;
float64: a seed gave other tokens)."""
import numpy as np
import pytest
import torch

import draftsmith
from draftsmith.decoding.engine import Settings
from draftsmith.errors import ArgumentError


@pytest.fixture(scope="module")
def demo():
    return draftsmith.assemble("demo")


TREE = dict(topk=4, steps=5, draft_tokens=8)


@pytest.mark.parametrize("count", [np.int64(100), np.uint8(250), np.int16(70)])
def test_a_numpy_max_new_tokens_past_the_first_pool_bucket_decodes_as_the_int(demo, count):
    want = demo.generate([3, 1, 4, 1], max_new_tokens=int(count), stop=[], **TREE).token_ids
    assert demo.generate([3, 1, 4, 1], max_new_tokens=count, stop=[], **TREE).token_ids == want
    assert demo.generate_baseline([3, 1, 4, 1], max_new_tokens=count, stop=[]).token_ids == want
    assert len(want) == int(count)


def test_a_numpy_uint8_count_is_checked_against_the_context_without_wrapping(demo):
    prompt = [5] * 2000   # the demo's context is 2048: 49 new tokens fit
    with pytest.raises(ArgumentError, match="max_new_tokens is 100: .* at most 49 new tokens fit"):
        demo.generate(prompt, max_new_tokens=np.uint8(100))
    from draftsmith.decoding.prompts import context_problems

    assert "at most 49 new tokens fit" in context_problems([prompt], np.uint8(100), 2048)[0]


def test_a_numpy_top_k_samples_as_the_int(demo):
    kw = dict(max_new_tokens=12, temperature=1.0, seed=5, stop=[])
    assert (demo.generate([5, 6], top_k=np.int64(3), **kw).token_ids
            == demo.generate([5, 6], top_k=3, **kw).token_ids)


@pytest.mark.parametrize("default", [torch.bfloat16, torch.float64])
def test_the_draws_are_float32_whatever_the_default_dtype(default):
    want = Settings(8, 1.0, 1.0, 0, frozenset(), torch.Generator().manual_seed(3)).uniforms(4096, device="cpu")
    before = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        got = Settings(8, 1.0, 1.0, 0, frozenset(), torch.Generator().manual_seed(3)).uniforms(4096, device="cpu")
    finally:
        torch.set_default_dtype(before)
    assert got.dtype == torch.float32 and torch.equal(got, want)
    assert len(set(got.tolist())) > 4000   # a bfloat16 grid holds about 1300 values in [0, 1)
