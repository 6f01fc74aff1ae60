"""The causal hint: a KVBatch carries mask=None exactly when its mask is plain bottom-right causal, and the two
spellings attend alike."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from draftsmith.components import backends
from draftsmith.decoding.batching import causal_batch, kv_batch
from draftsmith.decoding.kvpool import PagedKVPool
from draftsmith.decoding.tree import chain_tree


def _pool(lengths):
    pool = PagedKVPool([{"k": (1, 4), "v": (1, 4)}], num_pages=64)
    seqs = [pool.add_sequence() for _ in lengths]
    for s, n in zip(seqs, lengths):
        if n:
            pool.extend(s, n)
            pool.commit(s)
    return pool, seqs


@pytest.mark.parametrize(("lengths", "counts", "causal"), [
    ([0], [5], True),            # prefill of one prompt
    ([7], [1], True),            # decode
    ([3, 3], [2, 2], True),      # equal batch
    ([0, 0], [5, 3], False),     # prefill of prompts of different lengths: padding
    ([4, 6], [1, 1], False),     # decode at different lengths: padded reads
])
def test_causal_batch_hint(lengths, counts, causal):
    pool, seqs = _pool(lengths)
    kv, _ = causal_batch(pool, seqs, counts, "cpu")
    assert (kv.mask is None) == causal


def test_chain_verification_is_causal_and_a_tree_is_not():
    pool, seqs = _pool([5])
    chain = chain_tree(torch.tensor([3]), torch.tensor([[1, 2, 4]]))
    n = chain.tokens.shape[1]
    kv, _ = kv_batch(pool, seqs, [n], torch.arange(n)[None], chain.mask, chain.depth, "cpu")
    assert kv.mask is None
    tree_mask = torch.tensor([[[1, 0, 0], [1, 1, 0], [1, 0, 1]]], dtype=torch.bool)  # root with two children
    kv, _ = kv_batch(pool, seqs, [3], torch.arange(3)[None], tree_mask, torch.tensor([[0, 1, 1]]), "cpu")
    assert kv.mask is not None and not kv.mask[0, 0, -1, -2]


@settings(max_examples=30)
@given(T=st.integers(1, 8), extra=st.integers(0, 10), kv_heads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 999))
def test_mask_none_equals_the_explicit_causal_mask(T, extra, kv_heads, seed):
    g = torch.Generator().manual_seed(seed)
    S = T + extra
    q = torch.randn(2, 4, T, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, kv_heads, S, 8, generator=g, dtype=torch.float64) for _ in range(2))
    explicit = backends.causal_mask(T, S).expand(2, 1, T, S)
    for fn in (backends.sdpa, backends.eager, backends.flex, backends.auto):
        assert torch.allclose(fn(q, k, v, None, 0.3), backends.eager(q, k, v, explicit, 0.3), atol=1e-10)
