"""Mutation survivors of decoding/sampling.py, round 23: chunked_topk's vocabulary width read from the last axis.

The other survivors of the round are equivalent: CHUNK 256 -> 255, ``V < 2 * CHUNK`` -> ``<=`` or ``3 * CHUNK``
(the chunk size and the cut-over to torch.topk change which kernels run, not the values or, for distinct values,
the indices), ``0 < top_k <= V`` and _shifted's fill of 1 (both listed in test_tree_verify_kills.py).
"""
import pytest
import torch

from draftsmith.decoding.sampling import chunked_topk


@pytest.mark.parametrize("shape", [(512, 300), (2 * 512, 3, 400), (600, 2, 5)])
def test_chunked_topk_on_many_rows_of_a_narrow_vocabulary_is_torch_topk(shape):
    """catches sampling.py:39 x.shape[-1] -> x.shape[0]
    (the width is the last axis, whatever the leading ones: a batch of >= 2 * CHUNK rows over a vocabulary narrower
    than that must take torch.topk itself, not chunk the vocabulary by the row count. The hypothesis test draws at
    most 9 leading rows, so it never tells the two axes apart)"""
    x = torch.randperm(int(torch.tensor(shape).prod()), generator=torch.Generator().manual_seed(23)).float()
    x = x.view(shape)
    k = min(4, shape[-1])
    values, idx = chunked_topk(x, k)
    want = torch.topk(x, k, dim=-1)
    assert torch.equal(values, want.values) and torch.equal(idx, want.indices)
