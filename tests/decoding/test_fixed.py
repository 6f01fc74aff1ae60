"""The fixed-shape, sync-free step functions (fixed.py, static_pool.py) against the readable reference (tree.py,
verify.py, kvpool.compact_rows): equal outputs on the same inputs, invariants 1-7 and 10-19 on both."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import test_tree
import test_verify
from draftsmith.decoding.fixed import (
    children, draft_tree_fixed, greedy_verify_fixed, safe_logprobs, safe_probs, sample, sample_verify_fixed,
    tree_from_parents,
)
from draftsmith.decoding.kvpool import compact_rows
from draftsmith.decoding.static_pool import StaticKVPool, fixed_kv
from draftsmith.decoding.tree import Tree, draft_tree
from draftsmith.decoding.verify import greedy_verify, sample_verify


def trimmed(tree: Tree) -> Tree:
    """The fixed tree with retrieve cut to the reference's data-dependent shape (rows = leaves, depth + 1)."""
    R = int((~torch.zeros_like(tree.mask[..., 0]).scatter(1, tree.parents[:, 1:].clamp(min=0), True)).sum(-1).max())
    D = int(tree.depth.max())
    return Tree(tree.tokens, tree.parents, tree.mask, tree.depth, tree.retrieve[:, :R, : D + 1], tree.cand)


@given(test_tree.drafts())
def test_fixed_tree_equals_the_reference(case):
    """Invariants 1-7 through the reference: same nodes, mask, depths, candidates; retrieve padded to
    [B, n, steps+1]."""
    root, root_lp, table, k, steps, n = case
    ref = draft_tree(root, root_lp, test_tree._expand(table, []), k, steps, n)
    got = draft_tree_fixed(root, root_lp, test_tree._expand(table, []), k, steps, n)
    for name in ("tokens", "parents", "mask", "depth", "cand"):
        assert torch.equal(getattr(got, name), getattr(ref, name)), name
    B, R, D1 = ref.retrieve.shape
    assert got.retrieve.shape == (B, n, steps + 1)
    assert torch.equal(got.retrieve[:, :R, :D1], ref.retrieve)
    assert (got.retrieve[:, R:] == -1).all() and (got.retrieve[:, :, D1:] == -1).all()


@given(test_tree.drafts(topk=st.integers(2, 4)), st.floats(0.05, 1.0), st.integers(0, 2**16))
def test_nan_draft_logits_still_give_a_valid_tree(case, share, seed):
    """Invariant 11's precondition: NaN / inf draft logits (safe_logprobs) never break the tree invariants."""
    root, root_lp, table, k, steps, n = case
    g = torch.Generator().manual_seed(seed)
    poison = lambda x: torch.where(torch.rand(x.shape, generator=g) < share,  # noqa: E731
                                   torch.tensor([float("nan"), float("inf"), float("-inf")])[
                                       torch.randint(3, x.shape, generator=g)], x)
    expand = test_tree._expand(poison(table), [])
    tree = draft_tree_fixed(root, safe_logprobs(poison(root_lp)), lambda f, t: safe_logprobs(expand(f, t)), k,
                            steps, n)
    test_tree.check_tree(trimmed(tree), n)


@given(test_verify.trees(), st.data())
def test_greedy_verify_on_the_fixed_tree_equals_the_reference(case, data):
    tree, gen, V = case
    B, n = tree.tokens.shape
    logits = torch.randint(3, (B, n, V), generator=gen).float()
    for j in range(1, n):  # steer the target towards child j at half the parents, so long paths get accepted
        rows = torch.nonzero(torch.rand(B, generator=gen) < 0.5).squeeze(1)
        logits[rows, tree.parents[rows, j], tree.tokens[rows, j]] += 10.0 * j
    D = tree.retrieve.shape[-1] - 1
    padded = Tree(tree.tokens, tree.parents, tree.mask, tree.depth,
                  torch.nn.functional.pad(tree.retrieve, (0, 2, 0, 1), value=-1), tree.cand)  # deeper static shape
    ref = greedy_verify(tree, logits)
    one_hot = torch.nn.functional.one_hot(logits.argmax(-1), V).float()   # sampling from a one-hot p is greedy
    sampled = fixed_with_generator(padded, one_hot, generator=torch.Generator().manual_seed(0))
    for got in (greedy_verify(padded, logits), greedy_verify_fixed(padded, logits), sampled):
        assert torch.equal(ref.accepted, got.accepted) and torch.equal(ref.bonus, got.bonus)
        assert got.path.shape == (B, D + 3)                                 # the static shape: padded depth + 1
        assert torch.equal(got.path[:, : D + 1], ref.path) and (got.path[:, D + 1:] == -1).all()


def fixed_with_generator(tree, probs, draft_probs=None, generator=None):
    """sample_verify's signature over sample_verify_fixed: the uniforms come from the same generator."""
    B = tree.tokens.shape[0]
    D = tree.retrieve.shape[-1] - 1
    W = max(1, int((tree.parents.unsqueeze(1) == torch.arange(tree.parents.shape[1]).view(1, -1, 1)).sum(-1).max()))
    u = torch.rand(B, D * W + 1, generator=generator)
    return sample_verify_fixed(tree, probs, draft_probs, u[:, :-1].view(B, D, W), u[:, -1], W)


@pytest.mark.parametrize("name", ["test_sample_verify_with_one_hot_target_is_greedy",
                                  "test_sample_verify_never_emits_a_zero_probability_token",
                                  "test_sample_verify_top_k_siblings_is_lossless",
                                  "test_sample_verify_sampled_chain_is_lossless",
                                  "test_sample_verify_independent_sampled_siblings_is_lossless"])
def test_fixed_sampling_verification_passes_the_reference_tests(name, monkeypatch):
    """Invariant 10 for sample_verify_fixed: the reference's own tests (exactness with a one-hot p, no
    zero-probability token, the three lossless distribution tests), run against the fixed version."""
    monkeypatch.setattr(test_verify, "sample_verify", fixed_with_generator)
    getattr(test_verify, name)()


@pytest.mark.parametrize("parents", [[-1, 0, 0, 1], [-1, 0, 1, 2]], ids=["tree", "chain"])
@pytest.mark.parametrize("sampled_draft", [False, True])
def test_sample_verify_of_no_rows_equals_the_fixed_one(parents, sampled_draft):
    """A batch of zero rows of a multi-node tree: the reference returns what sample_verify_fixed returns (empty
    accepted [0], path [0, D+1], bonus [0], all int64), as greedy verification already did."""
    n, V, D = len(parents), 5, 3
    tree = tree_from_parents(torch.zeros(0, n, dtype=torch.long), torch.tensor([parents]).expand(0, n),
                             torch.full((0, n), -1), D)
    p = torch.rand(0, n, V)
    q = torch.rand(0, n, V) if sampled_draft else None
    ref = sample_verify(tree, p, q, torch.Generator().manual_seed(0))
    got = sample_verify_fixed(tree, p, q, torch.rand(0, D, 2), torch.rand(0), 2)        # width 2: the plan's topk
    for name, shape in (("accepted", (0,)), ("path", (0, D + 1)), ("bonus", (0,))):
        a, b = getattr(ref, name), getattr(got, name)
        assert a.shape == b.shape == shape and a.dtype == b.dtype == torch.long, name


def test_children_fixed_width():
    parents = torch.tensor([[-1, 0, 0, 1, 1, 1]])
    assert children(parents, 3).tolist() == [[[1, 2, -1], [3, 4, 5], [-1, -1, -1], [-1] * 3, [-1] * 3, [-1] * 3]]
    # a width past the node count (topk 9 over a tree of 8 nodes) keeps its columns: sampling reads each sibling
    assert children(parents[:, :2], 4).tolist() == [[[1, -1, -1, -1], [-1, -1, -1, -1]]]


@given(st.integers(2, 6), st.integers(0, 2**16))
def test_inverse_cdf_sampling_never_picks_a_zero_probability_token(V, seed):
    """Any row scale, u = 0 and u -> 1 included."""
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(V, generator=g) * (torch.rand(V, generator=g) < 0.6)
    p[torch.randint(V, (1,), generator=g)] = 0.5
    u = torch.cat([torch.tensor([0.0, 1 - 2**-24, 0.5]), torch.rand(200, generator=g)])
    assert (p[sample((3.7 * p).expand(len(u), V), u)] > 0).all()


def test_inverse_cdf_sampling_follows_the_distribution():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.0, 0.5, 0.1, 0.0, 0.25, 0.15])
    got = sample((2.0 * p).expand(20000, -1), torch.rand(20000, generator=g))
    test_verify._check_distribution(got, p, 0.02)


def test_safe_probs_and_logprobs():
    bad = torch.tensor([[float("nan"), 1.0, 0.0], [0.0, 0.0, 0.0], [0.2, 0.3, 0.5], [float("inf"), 0.0, 1.0]])
    assert torch.allclose(safe_probs(bad), torch.tensor([[1 / 3] * 3, [1 / 3] * 3, [0.2, 0.3, 0.5], [1 / 3] * 3]))
    lp = safe_logprobs(torch.tensor([[float("nan"), 0.0], [float("inf"), 1.0], [0.0, 0.0]]))
    assert not lp.isnan().any() and (lp <= 0).all() and torch.allclose(lp[2].exp(), torch.tensor([0.5, 0.5]))


# ---- the static pool: compaction equals compact_rows (invariants 13-15, 17-19) ---------------------------------
@st.composite
def commits(draw):
    B, cap = draw(st.integers(1, 4)), draw(st.integers(8, 24))
    rows = []
    for _ in range(B):
        n = draw(st.integers(1, 6))
        length = draw(st.integers(0, cap - n))
        sel = [0] + sorted(draw(st.lists(st.integers(1, n - 1), unique=True, max_size=n - 1))) if n > 1 else [0]
        rows.append((length, sel, draw(st.booleans())))
    return B, cap, rows, draw(st.integers(0, 2**16))


@given(commits())
def test_static_commit_equals_compact_rows(case):
    B, cap, rows, seed = case
    g = torch.Generator().manual_seed(seed)
    pool = StaticKVPool([{"k": (2, 3)}, {"latent": (4,), "rope": (2,)}], rows=B, capacity=cap)
    for layer in pool.storage:
        for t in layer.values():
            t.copy_(torch.randn(t.shape, generator=g))
    before = [{n: v.clone() for n, v in pool.view(i).items()} for i in range(2)]
    D1 = max(len(s) for _, s, _ in rows) + 1
    path = torch.tensor([s + [-1] * (D1 - len(s)) for _, s, _ in rows])
    accepted = torch.tensor([len(s) - 1 for _, s, _ in rows])
    active = torch.tensor([a for _, _, a in rows])
    pool.lens.copy_(torch.tensor([length for length, _, _ in rows]))
    pool.commit(path, accepted, active)
    select = torch.where(active[:, None], path, -1)
    for i in range(2):
        for name, old in before[i].items():
            want = compact_rows(old, torch.tensor([length for length, _, _ in rows]), select)
            assert torch.equal(pool.view(i)[name], want)
    assert pool.lens.tolist() == [length + (len(s) if a else 0) for length, s, a in rows]


def test_fixed_kv_masks_the_prefix_the_pending_rows_and_padding(monkeypatch):
    monkeypatch.setattr(StaticKVPool, "eager_trim", False)   # the whole capacity, as on CUDA
    pool = StaticKVPool([{"k": (1, 2), "v": (1, 2)}], rows=2, capacity=8)
    pool.lens.copy_(torch.tensor([3, 1]))
    for t in pool._stacked:
        t.fill_(float("nan"))
    tree = torch.tensor([[[1, 0], [1, 1]], [[1, 0], [1, 1]]], dtype=torch.bool)
    kv, pos = fixed_kv(pool, torch.tensor([[0, 1], [0, -1]]), torch.tensor([[0, 1], [0, 1]]), tree)
    assert kv.static and kv.write.tolist() == [[3, 4], [9, pool.trash]]
    assert pos.tolist() == [[3, 4], [1, 0]]
    m = kv.mask[:, 0].int().tolist()
    assert m[0] == [[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0]]
    assert m[1] == [[1, 1, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]]  # the padding row sees slot 0 only
    # the keys past the length that nobody attends were zeroed in the pool, every name; the rest kept their NaN
    for name, t in pool.view(0).items():
        assert (t == 0).all(-1).all(-1).int().tolist() == [[0] * 5 + [1] * 3, [0, 0] + [1] * 6], name
        assert t[0, :5].isnan().all() and t[1, :2].isnan().all()
    assert kv.read.tolist() == [[0, 1, 2, 3, 4, 0, 0, 0], [8, 9, 8, 8, 8, 8, 8, 8]]


def test_on_the_cpu_fixed_kv_spans_the_keys_some_row_attends():
    """The eager path cuts the capacity to max(lens) + P keys, the same mask and slots as the whole capacity's
    first ones, and zeroes the dead keys of that span only; when no key of it is dead (here: row 0 alone) nothing
    is zeroed."""
    pool = StaticKVPool([{"k": (1, 2), "v": (1, 2)}], rows=2, capacity=8)
    pool.lens.copy_(torch.tensor([3, 1]))
    tree = torch.tensor([[[1, 0], [1, 1]], [[1, 0], [1, 1]]], dtype=torch.bool)
    args = torch.tensor([[0, 1], [0, -1]]), torch.tensor([[0, 1], [0, 1]]), tree
    pool._stacked[0].fill_(float("nan"))
    kv, _ = fixed_kv(pool, *args)
    assert pool.trims and kv.mask.shape[-1] == 5 and kv.read.shape == (2, 5)
    zeroed = (pool.view(0)["k"] == 0).flatten(2).all(-1)
    assert zeroed.int().tolist() == [[0] * 8, [0, 0, 1, 1, 1, 0, 0, 0]]   # only the span's dead keys
    pool.eager_trim = False
    whole, _ = fixed_kv(pool, *args)
    assert torch.equal(kv.mask, whole.mask[..., :5]) and not whole.mask[..., 5:].any()
    assert torch.equal(kv.read, whole.read[:, :5])
    one = StaticKVPool([{"k": (1, 2), "v": (1, 2)}], rows=1, capacity=8)
    one.lens.fill_(3)
    one._stacked[0].fill_(float("nan"))
    kv, _ = fixed_kv(one, args[0][:1], args[1][:1], tree[:1])
    assert kv.mask.shape[-1] == 5 and one.view(0)["k"].isnan().all()    # no dead key in the span: nothing zeroed
    k = torch.randn(1, 2, 1, 2)
    got, mask = kv.exchange(0, k=k, v=k)
    assert got["k"].shape == (1, 5, 1, 2) and torch.equal(got["k"][0, 3:], k[0]) and mask is kv.mask
    kv, _ = fixed_kv(one, torch.tensor([[0]]), torch.tensor([[0]]), torch.ones(1, 1, 1, dtype=torch.bool))
    assert kv.mask is None and kv.read.shape == (1, 4)       # a decode sees every key of its span: no mask
    got, mask = kv.exchange(0, k=k[:, :1], v=k[:, :1])
    assert mask is None and got["v"].shape == (1, 4, 1, 2) and torch.equal(got["v"][0, 3], k[0, 0])


def test_causal_rows_stop_at_each_count_and_skip_inactive_rows():
    """The step's slot map: row b writes counts[b] new tokens (then -1), an inactive row writes nothing."""
    from draftsmith.decoding.engine import _causal

    rows, rel_pos, rel_mask = _causal(torch.tensor([3, 1, 2]), 3, torch.tensor([True, True, False]))
    assert rows.tolist() == [[0, 1, 2], [0, -1, -1], [-1, -1, -1]]
    assert rel_pos.tolist() == [[0, 1, 2]] * 3
    assert torch.equal(rel_mask[0], torch.tril(torch.ones(3, 3, dtype=torch.bool)))


def test_a_tree_without_retrieve_keeps_its_width():
    """retrieve=False (the engine's step): no rows, but the static depth the verifier reads from its width."""
    k, steps, n = 2, 3, 5
    root = torch.tensor([1, 2])
    tree = draft_tree_fixed(root, torch.randn(2, 8), lambda f, t: torch.randn(2, f.shape[1], 8), k, steps, n,
                            retrieve=False)
    assert tree.retrieve.shape == (2, 0, steps + 1) and tree.tokens.shape == (2, n)


@pytest.mark.parametrize("rows, capacity", [(0, 8), (2, 0), (-1, -1)])
def test_a_static_pool_without_rows_or_capacity_is_refused(rows, capacity):
    with pytest.raises(ValueError, match="rows and capacity must be >= 1"):
        StaticKVPool([{"k": (1, 2)}], rows=rows, capacity=capacity)
    pool = StaticKVPool([{"k": (1, 2)}], rows=1, capacity=1)                    # the smallest pool there is
    assert pool.view(0)["k"].shape == (1, 1, 1, 2) and pool.trash == 1


@pytest.mark.parametrize("trim", [True, False])
def test_the_scrub_zeroes_dead_keys_past_the_length_only(monkeypatch, trim):
    """A row whose queries are all padding (a finished row) attends slot 0 alone: its committed prefix is left as
    it is (only keys past a row's length are ever zeroed), its pending and stale keys are zeroed."""
    monkeypatch.setattr(StaticKVPool, "eager_trim", trim)
    pool = StaticKVPool([{"kv": (2, 1, 2)}], rows=2, capacity=6)
    pool.lens.copy_(torch.tensor([2, 3]))
    pool._stacked[0].fill_(float("nan"))
    tree = torch.ones(2, 1, 1, dtype=torch.bool)
    fixed_kv(pool, torch.tensor([[0], [-1]]), torch.tensor([[0], [0]]), tree)
    zeroed = (pool.view(0)["kv"] == 0).flatten(2).all(-1).int().tolist()
    span = 4 if trim else 6                                   # max(lens) + 1 pending
    assert zeroed == [[0, 0, 0] + [1] * (span - 3) + [0] * (6 - span), [0, 0, 0] + [1] * (span - 3) + [0] * (6 - span)]
