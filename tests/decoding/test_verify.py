"""Verification (invariants 10-12 of docs/INVARIANTS.md) and the sampling transforms."""

import dataclasses

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.stats import chisquare

from draftsmith.decoding.sampling import logprobs_for_drafting, target_probs
from draftsmith.decoding.tree import build_tree, chain_tree, draft_tree, max_tree_nodes
from draftsmith.decoding.verify import greedy_verify, sample_verify

N = 20000  # seeded draws per statistical test (one batch row each)


@st.composite
def trees(draw):
    """A random EAGLE-2 tree, its generator and vocabulary size (small, so drafts often match the target)."""
    B, k, steps = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    V = draw(st.integers(max(k, 2), 4))
    n = steps + 1 if k == 1 else draw(st.integers(2, max_tree_nodes(k, steps)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    table = torch.log_softmax(torch.randn(B, max_tree_nodes(k, steps), V, generator=gen), -1)
    expand = lambda idx, tok: table.gather(1, idx.unsqueeze(-1).expand(-1, -1, V) + 1)  # noqa: E731
    return draft_tree(torch.randint(V, (B,), generator=gen), table[:, 0], expand, k, steps, n), gen, V


def _rows(tree, b):
    return [[j for j in row if j >= 0] for row in tree.retrieve[b].tolist() if row[0] == 0]


def check_verdict(tree, v, token_at) -> None:
    """Invariant 12 per step: 0 <= accepted <= depth, path[:accepted+1] is a retrieve-row prefix, -1 after it."""
    for b in range(tree.tokens.shape[0]):
        a, path = v.accepted[b].item(), v.path[b].tolist()
        assert 0 <= a <= int(tree.depth[b].max()) and path[a + 1:] == [-1] * (len(path) - a - 1)
        assert any(row[:a + 1] == path[:a + 1] for row in _rows(tree, b))
        assert tree.depth[b, path[a]] == a and token_at(b, path[a]) == v.bonus[b]


@given(trees(), st.data())
def test_greedy_verify_is_longest_matching_path(case, data):
    tree, gen, V = case
    B, n = tree.tokens.shape
    logits = torch.randint(3, (B, n, V), generator=gen).float()  # ties: argmax takes the first
    for j in range(1, n):  # steer the target at half the parents towards child j, so long paths get accepted
        rows = torch.nonzero(torch.rand(B, generator=gen) < 0.5).squeeze(1)
        logits[rows, tree.parents[rows, j], tree.tokens[rows, j]] += 10.0 * j
    v = greedy_verify(tree, logits)
    target = logits.argmax(-1)
    check_verdict(tree, v, lambda b, i: target[b, i])
    for b in range(B):  # brute force over the retrieve rows
        tok, tgt = tree.tokens[b].tolist(), target[b].tolist()
        best = max(next((t for t in range(len(r) - 1) if tok[r[t + 1]] != tgt[r[t]]), len(r) - 1)
                   for r in _rows(tree, b))
        assert v.accepted[b] == best


def test_greedy_verify_draft_equal_to_target_accepts_everything():
    tokens = torch.tensor([[4, 1, 3], [2, 2, 0]])
    tree = chain_tree(torch.tensor([0, 1]), tokens)
    logits = torch.nn.functional.one_hot(torch.tensor([[4, 1, 3, 2], [2, 0, 0, 1]]), 5).float()
    v = greedy_verify(tree, logits)
    assert v.accepted.tolist() == [3, 1] and v.bonus.tolist() == [2, 0]
    assert v.path.tolist() == [[0, 1, 2, 3], [0, 1, -1, -1]]


@given(trees(), st.booleans())
def test_sample_verify_with_one_hot_target_is_greedy(case, sampled_draft):
    """Both sampling rules are exact: with a one-hot p they must reproduce greedy verification."""
    tree, gen, V = case
    B, n = tree.tokens.shape
    logits = torch.randn(B, n, V, generator=gen)
    logits[..., 0] += 2 * (torch.rand(B, n, generator=gen) < 0.5)  # make draft tokens 0 often right
    p = torch.nn.functional.one_hot(logits.argmax(-1), V).float()
    q = torch.softmax(torch.randn(B, n, V, generator=gen), -1) if sampled_draft else None
    v, g = sample_verify(tree, p, q, gen), greedy_verify(tree, logits)
    assert torch.equal(v.accepted, g.accepted) and torch.equal(v.path, g.path) and torch.equal(v.bonus, g.bonus)


@given(trees(), st.booleans())
def test_sample_verify_never_emits_a_zero_probability_token(case, sampled_draft):
    tree, gen, V = case
    B, n = tree.tokens.shape
    p = target_probs(torch.randn(B, n, V, generator=gen), 1.0, top_k=max(1, V // 2))
    q = torch.softmax(torch.randn(B, n, V, generator=gen), -1) if sampled_draft else None
    v = sample_verify(tree, p, q, gen)
    check_verdict(tree, v, lambda b, i: v.bonus[b])
    for b in range(B):
        path = v.path[b, : v.accepted[b] + 1].tolist()
        assert all(p[b, i, tree.tokens[b, j]] > 0 for i, j in zip(path, path[1:]))
        assert p[b, path[-1], v.bonus[b]] > 0


def _emitted(tree, v, k: int) -> torch.Tensor:
    # [N] the k-th token this step emits (k = 1, 2), -1 where the step emitted fewer
    node = v.path[:, k].clamp(min=0)
    drafted = torch.where(v.accepted >= k, tree.tokens.gather(1, node.unsqueeze(1)).squeeze(1), -1)
    return torch.where(v.accepted == k - 1, v.bonus, drafted)


def _check_distribution(samples: torch.Tensor, p: torch.Tensor, tv_bound: float) -> None:
    # samples: [M] tokens; p: [V] the distribution they must follow
    counts = torch.bincount(samples, minlength=p.numel()).double()
    assert counts[p == 0].sum() == 0
    support = p > 0
    expected = p[support].double() * samples.numel() / p[support].double().sum()
    assert chisquare(counts[support].numpy(), expected.numpy()).pvalue > 1e-3
    assert 0.5 * (counts / samples.numel() - p.double()).abs().sum() < tv_bound


def _probs(gen, n: int, V: int) -> torch.Tensor:
    return 0.7 * torch.softmax(2 * torch.randn(n, V, generator=gen), -1) + 0.3 / V  # every entry >= 0.3 / V


def test_sample_verify_top_k_siblings_is_lossless():
    """Invariant 10, deterministic siblings: over N=20000 seeded draws the first token follows p at the root
    (chi-squared p-value > 1e-3 and total variation < 0.02; zero-probability tokens never appear), and the second
    token, after the child that has children was accepted, follows p at that child (TV < 0.04 on ~N/4 draws)."""
    gen = torch.Generator().manual_seed(1)
    V = 6
    # root -> children with tokens 2, 0, 5 (in that order), then 1, 3 under the first child; n = 6
    cand = (torch.tensor([[2, 0, 5, 1, 3]]), torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0]]),
            torch.tensor([[-1, -1, -1, 0, 0]]))
    tree = build_tree(torch.zeros(N, dtype=torch.long), *(c.expand(N, -1) for c in cand), n=6)
    p = _probs(gen, 6, V)
    p[0] = target_probs(torch.tensor([1.0, 0.5, 1.5, -1.0, -2.0, 0.2]), 1.0, top_k=4)  # tokens 3, 4 impossible
    v = sample_verify(tree, p.expand(N, -1, -1), None, gen)
    first = _emitted(tree, v, 1)
    _check_distribution(first, p[0], 0.02)
    after = v.path[:, 1] == 1  # accepted token 2, whose node has children
    assert after.sum() > N // 5
    _check_distribution(_emitted(tree, v, 2)[after], p[1], 0.04)


def test_sample_verify_sampled_chain_is_lossless():
    """Invariant 10, sampled chain (residual max(p - q, 0)): drafts drawn from q != p; over N=20000 seeded draws the
    first token follows p at the root (chi-squared p-value > 1e-3, total variation < 0.02), and the second token,
    given the first was accepted, follows p at node 1 (chi-squared p-value > 1e-3, TV < 0.04)."""
    gen = torch.Generator().manual_seed(2)
    V, k = 5, 3
    p, q = _probs(gen, k + 1, V), _probs(gen, k + 1, V)
    assert 0.5 * (p[0] - q[1]).abs().sum() > 0.1  # emitting the drafts unchecked would fail the bound
    drafts = torch.stack([torch.multinomial(q[i].expand(N, V), 1, generator=gen).squeeze(1)
                          for i in range(1, k + 1)], 1)
    tree = chain_tree(torch.zeros(N, dtype=torch.long), drafts)
    v = sample_verify(tree, p.expand(N, -1, -1), q.expand(N, -1, -1), gen)
    _check_distribution(_emitted(tree, v, 1), p[0], 0.02)
    second = _emitted(tree, v, 2)
    _check_distribution(second[v.accepted >= 1], p[1], 0.04)


def test_sample_verify_independent_sampled_siblings_is_lossless():
    """Two root children drawn independently from the same q (SpecInfer's rule): over N=20000 seeded draws the
    first token follows p at the root (chi-squared p-value > 1e-3, total variation < 0.02)."""
    gen = torch.Generator().manual_seed(3)
    V = 5
    p, q = _probs(gen, 1, V)[0], _probs(gen, 1, V)[0]
    drafts = torch.multinomial(q.expand(N, V), 2, replacement=True, generator=gen)
    tree = build_tree(torch.zeros(N, dtype=torch.long), drafts, torch.tensor([[-1.0, -2.0]]).expand(N, -1),
                      torch.full((N, 2), -1), n=3)
    probs = torch.stack([p, _probs(gen, 1, V)[0], _probs(gen, 1, V)[0]]).expand(N, -1, -1)
    v = sample_verify(tree, probs, torch.stack([q, q, q]).expand(N, -1, -1), gen)
    _check_distribution(_emitted(tree, v, 1), p, 0.02)


def test_sample_verify_rejects_a_token_impossible_under_both_p_and_q():
    """q at the child equals p at the root and both give the drafted token 2 probability 0: the token is refused
    (u * q(x) < p(x) is 0 < 0), the residual max(p - q, 0) is all zero, so the bonus falls back to p itself."""
    gen = torch.Generator().manual_seed(4)
    B = 64
    tree = chain_tree(torch.zeros(B, dtype=torch.long), torch.full((B, 1), 2))
    p = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]).expand(B, -1, -1)
    v = sample_verify(tree, p, p[:, [1, 0]], gen)  # q[:, 1] == p[:, 0]
    assert v.accepted.tolist() == [0] * B and v.path.tolist() == [[0, -1]] * B
    assert set(v.bonus.tolist()) == {0, 1}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sample_verify_computes_low_precision_probs_in_float32(dtype):
    """bf16 / fp16 probabilities are upcast first: the verdict equals the one for the same values in float32 (u
    drawn in bf16 is coarse near 1, so without the upcast a few of the 4096 rows would accept differently)."""
    B, V = 4096, 4
    cand = torch.tensor([[2, 0, 1]]), torch.tensor([[-1.0, -2.0, -3.0]]), torch.tensor([[-1, -1, 0]])
    tree = build_tree(torch.zeros(B, dtype=torch.long), *(c.expand(B, -1) for c in cand), n=4)
    gen = torch.Generator().manual_seed(5)
    p, q = (torch.softmax(torch.randn(B, 4, V, generator=gen), -1).to(dtype) for _ in range(2))
    low, full = (sample_verify(tree, p.to(t), q.to(t), torch.Generator().manual_seed(6))
                 for t in (dtype, torch.float32))
    assert all(torch.equal(getattr(low, f.name), getattr(full, f.name)) for f in dataclasses.fields(low))


def test_verdict_is_frozen():
    v = greedy_verify(chain_tree(torch.tensor([0]), torch.tensor([[1]])), torch.zeros(1, 2, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.accepted = torch.zeros(1, dtype=torch.long)


# sampling.py

def test_target_probs_temperature_and_dtype():
    logits = torch.randn(3, 7, dtype=torch.float64)
    assert torch.allclose(target_probs(logits, 0.5), torch.softmax(logits / 0.5, -1))
    assert target_probs(logits, 1.0).dtype == torch.float64
    assert target_probs(logits.bfloat16(), 1.0).dtype == torch.float32
    with pytest.raises(ValueError):
        target_probs(logits, 0.0)


@given(st.integers(1, 8), st.floats(0.2, 3.0), st.integers(0, 2**16))
def test_target_probs_top_k_keeps_the_k_largest(top_k, temperature, seed):
    logits = torch.randn(2, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    probs = target_probs(logits, temperature, top_k=top_k)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(1, logits.topk(top_k, -1).indices, True)
    assert torch.equal(probs > 0, keep)
    assert torch.allclose(probs, torch.softmax((logits / temperature).masked_fill(~keep, float("-inf")), -1))


@given(st.floats(0.05, 1.0), st.integers(0, 2**16))
def test_target_probs_top_p_keeps_the_smallest_prefix_reaching_p(top_p, seed):
    logits = torch.randn(8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    full = torch.softmax(logits, -1).sort(descending=True).values
    cum = full.cumsum(0)
    assume(((cum - top_p).abs() > 1e-9).all())
    m = int((cum < top_p).sum()) + 1  # tokens needed to reach top_p
    probs = target_probs(logits, 1.0, top_p=top_p)
    assert torch.equal(probs > 0, torch.zeros(8, dtype=torch.bool).scatter(0, logits.topk(m).indices, True))
    assert torch.allclose(probs.sum(), torch.tensor(1.0, dtype=torch.float64))


def test_target_probs_applies_top_k_before_top_p():
    logits = torch.log(torch.tensor([0.4, 0.3, 0.2, 0.1]))
    # top-k 2 gives [4/7, 3/7]; 4/7 >= 0.5 alone (top-p on the full distribution would keep two tokens)
    assert target_probs(logits, 1.0, top_p=0.5, top_k=2).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert (target_probs(logits, 1.0, top_p=0.5) > 0).tolist() == [True, True, False, False]


def test_logprobs_for_drafting():
    logits = torch.randn(2, 9)
    assert torch.allclose(logprobs_for_drafting(logits, 0.0), torch.log_softmax(logits, -1))
    assert torch.allclose(logprobs_for_drafting(logits, 2.0), torch.log_softmax(logits / 2, -1))
    assert logprobs_for_drafting(logits.half(), 1.0).dtype == torch.float32
    with pytest.raises(ValueError):
        logprobs_for_drafting(logits, -1.0)
