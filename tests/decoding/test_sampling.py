"""sampling.py against transformers' own logits warpers and hand-computed edge cases.

The shapes here are the engine's: [B, k+1, V] target logits, not only the [V] and [B, V] rows of test_verify.py.
"""

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from draftsmith.decoding.sampling import CHUNK, chunked_topk, greedy_token, logprobs_for_drafting, target_probs


def _hf_probs(logits: torch.Tensor, temperature: float, top_p: float, top_k: int) -> torch.Tensor:
    # transformers' sampling pipeline (temperature, then top-k, then top-p), row by row over the last dim
    rows = logits.reshape(-1, logits.shape[-1]) / temperature
    if top_k:
        rows = TopKLogitsWarper(top_k)(None, rows)
    if top_p < 1:
        rows = TopPLogitsWarper(top_p)(None, rows)
    return torch.softmax(rows, -1).reshape(logits.shape)


@given(st.integers(1, 3), st.integers(1, 3), st.integers(2, 9), st.floats(0.3, 2.5), st.integers(0, 9),
       st.floats(0.05, 1.0), st.integers(0, 2**16))
def test_target_probs_matches_transformers_warpers_on_every_row_of_a_batch(B, n, V, temperature, top_k, top_p,
                                                                          seed):
    logits = torch.randn(B, n, V, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    # keep clear of the top-p boundary, where the two cumulative sums may round to different sides
    x = logits / temperature
    if 0 < top_k < V:
        x = x.masked_fill(x < x.topk(top_k, -1).values[..., -1:], float("-inf"))
    cum = torch.softmax(x, -1).sort(-1, descending=True).values.cumsum(-1)
    assume(((cum - top_p).abs() > 1e-9).all())
    probs = target_probs(logits, temperature, top_p=top_p, top_k=top_k)
    expected = _hf_probs(logits, temperature, top_p, top_k)
    assert probs.shape == logits.shape
    assert torch.equal(probs > 0, expected > 0)
    assert torch.allclose(probs, expected)


def test_top_p_one_filters_nothing_not_even_a_tail_the_cumulative_sum_rounds_past():
    # float32 probs [0.5, 0.5, ~5e-31]: the mass above the last token is exactly 1.0, yet top_p = 1 means no
    # nucleus at all (transformers does not even add the warper), so the tiny token stays possible
    logits = torch.tensor([0.0, 0.0, -69.0])
    probs = target_probs(logits, 1.0, top_p=1.0)
    assert torch.equal(probs, torch.softmax(logits, -1)) and bool(probs[2] > 0)


def test_top_p_stops_at_the_first_token_whose_mass_reaches_p_exactly():
    # 4 equal tokens, exact quarters: two of them reach 0.5 exactly, so a third is one too many
    probs = target_probs(torch.zeros(4), 1.0, top_p=0.5)
    assert int((probs > 0).sum()) == 2 and torch.equal(probs[probs > 0], torch.full((2,), 0.5))


def test_top_p_breaks_exact_ties_by_token_id_whatever_the_sort_backend():
    # 128 equal tokens (exact multiples of 1/128): the nucleus of 0.5 is 64 of them, and which 64 must not depend
    # on how the sort orders equal keys: a stable sort keeps the lowest ids, on every device
    probs = target_probs(torch.zeros(2, 128), 1.0, top_p=0.5)
    assert torch.equal(probs > 0, (torch.arange(128) < 64).expand(2, -1))


@pytest.mark.parametrize("shape", [(9,), (2, 9), (2, 3, 9)])
@pytest.mark.parametrize("temperature", [0.0, 0.5, 1.0, 2.0])
def test_logprobs_for_drafting_normalises_over_the_vocabulary_at_any_rank(shape, temperature):
    logits = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    expected = torch.log_softmax(logits / (temperature or 1.0), -1)
    assert torch.allclose(logprobs_for_drafting(logits, temperature), expected)


@pytest.mark.parametrize("top_p", [0.0, -0.1, 1.0000001, 1.5, 2.0])
def test_top_p_outside_0_1_is_refused(top_p):
    with pytest.raises(ValueError, match="top_p must be in"):
        target_probs(torch.zeros(3), 1.0, top_p=top_p)


def test_the_bounds_themselves_are_accepted():
    assert torch.equal(target_probs(torch.zeros(4), 1.0, top_p=1.0, top_k=0), torch.full((4,), 0.25))
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        target_probs(torch.zeros(4), 1.0, top_k=-1)


@given(st.lists(st.integers(1, 3), max_size=2), st.integers(1, 700), st.sampled_from(["float32", "bfloat16"]),
       st.integers(1, 4), st.floats(0, 0.5), st.integers(0, 2**16))
def test_greedy_token_is_the_first_maximum_as_argmax_gives(lead, V, dtype, spread, inf_share, seed):
    # few distinct values: ties inside a chunk and across chunks; some -inf, sometimes whole rows of it; widths
    # below, at and past a chunk and not a multiple of one (the padding)
    g = torch.Generator().manual_seed(seed)
    logits = torch.randint(-spread, spread + 1, (*lead, V), generator=g).to(getattr(torch, dtype))
    logits[torch.rand(logits.shape, generator=g) < inf_share] = float("-inf")
    if lead and seed % 3 == 0:
        logits[0] = float("-inf")
    want = logits.argmax(-1)
    assert torch.equal(greedy_token(logits), want)


def test_chunked_topk_points_at_real_minus_infinities_when_few_values_are_finite():
    # the deep Hypothesis profile's find: a padded last chunk tied its -inf padding with the row's own -inf
    x = torch.tensor([1.0, float("-inf"), 1.0, float("-inf"), 0.0])
    values, idx = chunked_topk(x, 5)
    assert values.tolist() == [1, 1, 0, float("-inf"), float("-inf")] and sorted(idx.tolist()) == [0, 1, 2, 3, 4]
    wide = torch.full((2, 2 * CHUNK + 3), float("-inf"))   # two whole chunks and a tail: the two-stage form
    wide[:, 2 * CHUNK + 1] = 2.0
    values, idx = chunked_topk(wide, 4)
    assert idx[:, 0].tolist() == [2 * CHUNK + 1] * 2 and torch.equal(wide.gather(-1, idx), values)


@pytest.mark.parametrize("widths", [(8, 192, CHUNK, CHUNK + 2, CHUNK + 44, 2 * CHUNK - 1, 2 * CHUNK, 2 * CHUNK + 88)])
def test_chunked_topk_compiled_with_a_symbolic_width_selects_what_torch_topk_selects(widths):
    # inductor compiled one whole chunk and a tail, the width symbolic, into the tail's top k alone (CHUNK + 44:
    # wrong tokens) or an out-of-range error (CHUNK + 2), after narrower widths (the order matters: each width makes
    # its graph under the guards of those before); a second draft vocabulary in one process makes the width symbolic
    torch._dynamo.reset()
    torch.set_num_threads(2)   # inductor's CPU code for one thread did not show it (conftest sets 1 back after)
    compiled = torch.compile(chunked_topk, dynamic=True)
    for V in widths:
        x = torch.randn(1, 4, V, generator=torch.Generator().manual_seed(V)).log_softmax(-1)
        values, idx = compiled(x, 4)
        assert torch.equal(values, torch.topk(x, 4, dim=-1).values), V
        assert torch.equal(x.gather(-1, idx), values), V


def test_greedy_token_finds_a_maximum_in_any_chunk_and_the_first_of_equal_ones():
    V = 3 * CHUNK + 17
    for at in (0, CHUNK - 1, CHUNK, 2 * CHUNK + 5, V - 1):
        logits = torch.zeros(2, V)
        logits[0, at] = 1
        logits[1, at:] = 1                                     # every later one equal: the first is the answer
        assert greedy_token(logits).tolist() == [at, at]


@given(st.lists(st.integers(1, 3), max_size=2), st.integers(1, 700), st.integers(1, 9), st.integers(1, 4),
       st.floats(0, 0.95), st.booleans(), st.integers(0, 2**16))
def test_chunked_topk_selects_what_torch_topk_selects(lead, V, k, spread, inf_share, distinct, seed):
    # the same sorted values; indices in range, distinct, pointing at those values (also where fewer than k values
    # are above -inf: a padded form once picked its padding there); with distinct values the very indices
    # torch.topk gives. Ties and -inf within and across chunks, widths around a chunk and past it
    assume(k <= V)
    g = torch.Generator().manual_seed(seed)
    if distinct:
        x = torch.randperm(V * max(1, int(torch.tensor(lead).prod())), generator=g).float().view(*lead, V)
    else:
        x = torch.randint(-spread, spread + 1, (*lead, V), generator=g).float()
        x[torch.rand(x.shape, generator=g) < inf_share] = float("-inf")
    values, idx = chunked_topk(x, k)
    want = torch.topk(x, k, dim=-1)
    assert torch.equal(values, want.values)
    assert ((0 <= idx) & (idx < V)).all() and torch.equal(x.gather(-1, idx), values)
    assert (idx.sort(-1).values.diff(dim=-1) > 0).all()                   # no index twice
    if distinct:
        assert torch.equal(idx, want.indices)
