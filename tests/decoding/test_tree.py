"""Tree construction: invariants 1-7 of docs/INVARIANTS.md as Hypothesis properties, plus examples."""

import dataclasses

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from draftsmith.decoding.tree import (
    build_tree, chain_tree, draft_candidates, draft_tree, max_tree_nodes, select_frontier, topk_children,
)

INF = float("-inf")
# tiny value sets force ties; 0.0 is a child of probability 1.0 (score equal to its parent's); None = continuous
VALUE_SETS = [(0.0,), (0.0, -1.0), (0.0, -0.5, -1.0, -2.0), (0.0, -1.0, INF), None]


def _table(gen: torch.Generator, shape: tuple, values) -> torch.Tensor:
    if values is None:
        return torch.log_softmax(torch.randn(shape, generator=gen), dim=-1)
    return torch.tensor(values)[torch.randint(len(values), shape, generator=gen)]


@st.composite
def drafts(draw, topk=st.integers(1, 4)):
    B, k, steps = draw(st.integers(1, 3)), draw(topk), draw(st.integers(1, 5))
    V = draw(st.integers(k, k + 3))
    hi = max_tree_nodes(k, steps)
    n = steps + 1 if k == 1 else draw(st.one_of(st.integers(2, hi), st.integers(max(2, hi // 2), hi), st.just(hi)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    values = draw(st.sampled_from(VALUE_SETS))
    root = torch.randint(V, (B,), generator=gen)
    C = max_tree_nodes(k, steps) - 1
    # draft log-probs after each candidate, looked up by candidate index so the test knows every score's origin
    return root, _table(gen, (B, V), values), _table(gen, (B, C, V), values), k, steps, n


def _expand(table, calls):
    def expand(idx, tokens):  # idx, tokens: [B, k] -> [B, k, V]
        calls.append((idx, tokens))
        return table.gather(1, idx.unsqueeze(-1).expand(-1, -1, table.shape[-1]))
    return expand


def _stable_best(scores: list, k: int) -> list:
    return sorted(sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k])


def check_tree(tree, n: int) -> None:
    """Invariants 1, 2, 3, 5, 6 (and mask == the ancestor relation of `parents`)."""
    B = tree.tokens.shape[0]
    assert tree.tokens.shape == tree.parents.shape == tree.depth.shape == tree.cand.shape == (B, n)  # 1
    assert tree.mask.shape == (B, n, n) and tree.mask.dtype == torch.bool
    m = tree.mask
    assert m.diagonal(dim1=1, dim2=2).all() and m[:, :, 0].all() and not m.triu(1).any()  # 2
    chained = m.unsqueeze(-1) & m.unsqueeze(1)  # [B, i, j, k] = m[i, j] & m[j, k]
    assert not (chained & ~m.unsqueeze(2)).any()  # 3: m[i, j] implies m[j] <= m[i]
    assert torch.equal(tree.depth, m.sum(-1) - 1)  # 5
    assert tree.retrieve.shape[-1] == int(tree.depth.max()) + 1
    for b in range(B):
        par, mask, depth = tree.parents[b].tolist(), m[b].tolist(), tree.depth[b].tolist()
        assert par[0] == -1 and tree.cand[b, 0] == -1 and all(0 <= par[i] < i for i in range(1, n))
        for i in range(1, n):
            anc = {j for j in range(n) if mask[par[i]][j]} | {i}
            assert {j for j in range(n) if mask[i][j]} == anc and depth[i] == depth[par[i]] + 1
        leaves = [i for i in range(n) if i not in par]
        rows = tree.retrieve[b].tolist()
        assert len(rows) >= len(leaves) and all(set(r) == {-1} for r in rows[len(leaves):])  # padding rows
        for leaf, row in zip(leaves, rows):  # 6: one row per leaf, in leaf order
            path = [j for j in row if j >= 0]
            assert row == path + [-1] * (len(row) - len(path)) and path[0] == 0 and path[-1] == leaf
            assert all(par[c] == p and depth[c] == depth[p] + 1 for p, c in zip(path, path[1:]))
            assert path == [j for j in range(n) if mask[leaf][j]]


def check_chain(tree, k: int) -> None:
    """Invariant 7."""
    B = tree.tokens.shape[0]
    check_tree(tree, k + 1)
    assert torch.equal(tree.mask, torch.ones(B, k + 1, k + 1, dtype=torch.bool).tril())
    assert torch.equal(tree.depth, torch.arange(k + 1).expand(B, -1))
    assert torch.equal(tree.retrieve, torch.arange(k + 1).expand(B, 1, -1))
    assert torch.equal(tree.cand, torch.arange(-1, k).expand(B, -1))


@given(drafts())
def test_draft_tree_properties(case):
    root, root_lp, table, k, steps, n = case
    calls = []
    cand = draft_candidates(root_lp, _expand(table, calls), k, steps)
    tree = build_tree(root, *cand, n)
    assert len(calls) == steps - 1
    check_tree(tree, n)
    again = draft_tree(root, root_lp, _expand(table, []), k, steps, n)
    assert all(torch.equal(getattr(tree, f), getattr(again, f)) for f in ("tokens", "parents", "mask", "retrieve"))
    tokens, scores, parents = (t.tolist() for t in cand)
    for b in range(root.shape[0]):
        tok, sc, par = tokens[b], scores[b], parents[b]
        assert len(tok) == max_tree_nodes(k, steps) - 1
        for c in range(len(tok)):  # each score is its parent's plus the draft log-prob of its token
            lp = root_lp[b] if par[c] < 0 else table[b, par[c]]
            parent_score = torch.tensor(0.0 if par[c] < 0 else sc[par[c]])  # float32 sum, as in the code
            assert par[c] < c and sc[c] == (parent_score + lp[tok[c]]).item()
        groups = {}
        for c in range(len(tok)):
            groups.setdefault(par[c], []).append(c)
        for p, kids in groups.items():  # the k best tokens of the parent, descending, distinct
            lp = root_lp[b] if p < 0 else table[b, p]
            got = [lp[tok[c]].item() for c in kids]
            assert got == torch.sort(lp, descending=True).values[:k].tolist() and len({tok[c] for c in kids}) == k
        level, offset = k, 0  # the expanded frontier is the stable top-k of the last level
        for idx, ftok in calls:
            best = [offset + i for i in _stable_best(sc[offset:offset + level], k)]
            assert idx[b].tolist() == best and ftok[b].tolist() == [tok[c] for c in best]
            offset, level = offset + level, k * k
        kept = tree.cand[b, 1:].tolist()
        assert kept == _stable_best(sc, n - 1)
        for i in range(1, n):  # 4: closed under the parent relation, ties included
            assert tree.tokens[b, i] == tok[kept[i - 1]]
            p_node = tree.parents[b, i].item()
            assert par[kept[i - 1]] == (-1 if p_node == 0 else kept[p_node - 1])
    assert torch.equal(tree.tokens[:, 0], root)


@given(drafts(topk=st.just(1)))
def test_draft_tree_topk1_is_chain(case):
    root, root_lp, table, k, steps, n = case
    tree = draft_tree(root, root_lp, _expand(table, []), k, steps, n)
    check_chain(tree, steps)
    assert torch.equal(tree.tokens, chain_tree(root, tree.tokens[:, 1:]).tokens)


@given(st.integers(1, 3), st.integers(0, 8))
def test_chain_tree(B, k):
    tokens = torch.randint(50, (B, k))
    tree = chain_tree(torch.arange(B), tokens)
    check_chain(tree, k)
    assert torch.equal(tree.tokens, torch.cat([torch.arange(B).view(B, 1), tokens], 1))
    assert torch.equal(tree.parents, torch.arange(-1, k).expand(B, -1))


@given(st.lists(st.lists(st.sampled_from([0.0, -1.0, -2.0, INF]), min_size=5, max_size=5), min_size=1,
                max_size=3), st.integers(0, 5))
def test_select_frontier_is_stable_top_k(rows, k):
    got = select_frontier(torch.tensor(rows), k)
    assert got.tolist() == [_stable_best(r, k) for r in rows]


def test_select_frontier_rejects_k_above_c():
    with pytest.raises(ValueError, match="cannot select 4 of 3 candidates"):
        select_frontier(torch.zeros(1, 3), 4)


def test_topk_children_layout():
    lp = torch.log(torch.tensor([[[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]]]))  # [1, F=2, V=3]
    tokens, scores, parent = topk_children(torch.tensor([[-1.0, -2.0]]), lp, 2)
    assert tokens.tolist() == [[1, 2, 0, 2]] and parent.tolist() == [[0, 0, 1, 1]]
    own = lp[0].gather(1, tokens.view(2, 2)).view(1, 4)
    assert torch.allclose(scores, torch.tensor([[-1.0, -1.0, -2.0, -2.0]]) + own)


def test_build_tree_child_with_probability_one_needs_its_parent():
    # candidates: 0 = A (-1.0, root child), 1 = B (-0.5, root child), 2 = A's child with p = 1.0 (-1.0, ties A)
    args = torch.tensor([[7, 8, 9]]), torch.tensor([[-1.0, -0.5, -1.0]]), torch.tensor([[-1, -1, 0]])
    tree = build_tree(torch.tensor([5]), *args, n=3)
    assert tree.cand.tolist() == [[-1, 0, 1]] and tree.tokens.tolist() == [[5, 7, 8]]
    tree = build_tree(torch.tensor([5]), *args, n=4)
    assert tree.parents.tolist() == [[-1, 0, 0, 1]] and tree.depth.tolist() == [[0, 1, 1, 2]]
    assert tree.retrieve.tolist() == [[[0, 2, -1], [0, 1, 3]]]
    check_tree(tree, 4)


def test_build_tree_pads_retrieve_across_batch():
    # row 0: a chain of 3 (one leaf); row 1: three root children (three leaves)
    tokens = torch.tensor([[1, 2, 3], [1, 2, 3]])
    scores = torch.tensor([[-1.0, -2.0, -3.0], [-1.0, -2.0, -3.0]])
    parents = torch.tensor([[-1, 0, 1], [-1, -1, -1]])
    tree = build_tree(torch.tensor([0, 0]), tokens, scores, parents, n=4)
    assert tree.retrieve.tolist() == [[[0, 1, 2, 3], [-1] * 4, [-1] * 4], [[0, 1, -1, -1], [0, 2, -1, -1],
                                                                            [0, 3, -1, -1]]]
    check_tree(tree, 4)


def test_build_tree_of_the_root_alone():
    # n = 1 keeps no candidate: the root is the only node, the only leaf, and the only retrieve row
    tree = build_tree(torch.tensor([5, 6]), torch.tensor([[1, 2], [3, 4]]), torch.full((2, 2), -1.0),
                      torch.full((2, 2), -1), n=1)
    check_tree(tree, 1)
    assert tree.tokens.tolist() == [[5], [6]] and tree.retrieve.tolist() == [[[0]], [[0]]]


@pytest.mark.parametrize("n", [0, 3])  # too few nodes for a root; more nodes than candidates + 1
def test_build_tree_errors(n):
    with pytest.raises(ValueError, match=f"cannot build a tree of {n} nodes from 1 candidates"):
        build_tree(torch.tensor([0]), torch.tensor([[1]]), torch.tensor([[-1.0]]), torch.tensor([[-1]]), n=n)


def test_build_tree_refuses_a_child_above_its_parent():
    with pytest.raises(ValueError, match="parent was dropped"):  # a child scoring above its parent would be kept
        build_tree(torch.tensor([0]), torch.tensor([[1, 2]]), torch.tensor([[-2.0, -1.0]]), torch.tensor([[-1, 0]]), 2)


@pytest.mark.parametrize("topk,steps,n,message", [
    (2, 3, 12, r"n=12 nodes: n - 1 must be in 1\.\.10 for"), (2, 3, 1, r"n=1 nodes: n - 1 must be in 1\.\.10 for"),
    (1, 3, 3, "a chain .* of 3 steps has n = 4 nodes, got n=3"), (0, 3, 2, "topk and steps must be >= 1"),
    (3, 0, 2, "topk and steps must be >= 1"),
])
def test_draft_tree_rejects_bad_sizes(topk, steps, n, message):
    with pytest.raises(ValueError, match=message):
        draft_tree(torch.tensor([0]), torch.zeros(1, 4), lambda i, t: torch.zeros(1, topk, 4), topk, steps, n)


def test_draft_tree_largest_tree_keeps_every_candidate():
    gen = torch.Generator().manual_seed(0)
    table = torch.log_softmax(torch.randn(1, 12, 6, generator=gen), -1)
    tree = draft_tree(torch.tensor([3]), table[:, 0], _expand(table, []), 2, 3, n=max_tree_nodes(2, 3))
    assert tree.cand[0, 1:].tolist() == list(range(10)) and int(tree.depth.max()) == 3
    check_tree(tree, 11)


def test_tree_is_frozen():
    tree = chain_tree(torch.tensor([0]), torch.tensor([[1, 2]]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree.tokens = torch.zeros(1, 3, dtype=torch.long)
