"""Mutation survivors of draftsmith/decoding/fixed.py, round 24e (scripts/mutate.py), each planted and seen failing.
Expectations come from the readable reference (tree.py) or are worked out by hand, never from fixed.py's output."""
import pytest
import torch

from draftsmith.decoding.fixed import (
    build_tree_fixed,
    greedy_verify_fixed,
    sample_verify_fixed,
    tree_from_parents,
)
from draftsmith.decoding.tree import build_tree
from draftsmith.decoding.verify import greedy_verify, sample_verify


def test_a_kept_candidate_whose_parent_was_dropped_hangs_under_the_root():
    """catches fixed.py:86 ``node_of = torch.full((B, C), -1, ...)`` -> ``torch.full((B, C), 1, ...)``
    (build_tree_fixed drops tree.build_tree's host-side check that every kept candidate's parent is kept; a
    candidate whose parent was not kept reads node_of's fill, and ``.clamp(min=0)`` turns the -1 into node 0, the
    root, so the result stays a tree: parents[:, i] < i. A fill of 1 hung the orphan under node 1, here itself.
    Out of the engine's contract (safe_logprobs never lets a score increase), so only a draft that broke it
    reaches this; the reference raises on the same input.) Candidates: 0 (token 7, score -9, under the root),
    1 (token 8, score -1, under candidate 0); n = 2 keeps candidate 1 alone, whose parent 0 was dropped."""
    root = torch.tensor([3, 4])
    tokens, scores = torch.tensor([[7, 8], [7, 8]]), torch.tensor([[-9.0, -1.0], [-9.0, -1.0]])
    parents = torch.tensor([[-1, 0], [-1, 0]])
    with pytest.raises(ValueError, match="parent was dropped"):
        build_tree(root, tokens, scores, parents, 2)
    tree = build_tree_fixed(root, tokens, scores, parents, 2, depth_max=1)
    assert tree.tokens.tolist() == [[3, 8], [4, 8]] and tree.cand.tolist() == [[-1, 1], [-1, 1]]
    assert tree.parents.tolist() == [[-1, 0], [-1, 0]]                     # under the root, not under itself
    assert tree.depth.tolist() == [[0, 1], [0, 1]]
    assert tree.mask.tolist() == [[[True, False], [True, True]]] * 2
    assert tree.retrieve.tolist() == [[[0, 1], [-1, -1]]] * 2               # one leaf, padded to n rows


def test_greedy_verification_breaks_a_tie_at_equal_depth_to_the_lower_index():
    """catches fixed.py:195 ``tree.depth * (n + 1) + (n - idx)`` -> ``+ (n + idx)``
    (greedy_verify_fixed keeps the deepest node whose whole path matches, then the lowest index: the reference
    walk's choice, which tries the children of a node in index order. Two good nodes at one depth need siblings
    carrying the same token, which top-k drafting never makes, so the lossless tests never tie; the rule is still
    the function's own, and the reference agrees with it here.) Root 0 with children 1 and 2, both token 5; the
    target's argmax is 5 at the root, 7 at node 1, 9 at node 2: both children are accepted candidates, the walk
    takes node 1 and its bonus 7."""
    tree = tree_from_parents(torch.tensor([[0, 5, 5]]), torch.tensor([[-1, 0, 0]]), torch.tensor([[-1, 0, 1]]), 1)
    logits = torch.nn.functional.one_hot(torch.tensor([[5, 7, 9]]), 10).float()
    ref, got = greedy_verify(tree, logits), greedy_verify_fixed(tree, logits)
    assert ref.accepted.tolist() == [1] and ref.path.tolist() == [[0, 1]] and ref.bonus.tolist() == [7]
    assert got.accepted.tolist() == [1] and got.path.tolist() == [[0, 1]] and got.bonus.tolist() == [7]


def test_a_tree_of_the_root_alone_has_one_path_as_the_reference_does():
    """catches fixed.py:64 ``parents[:, 1:].clamp(min=0)`` -> ``parents[:, 0:]``
    (_retrieve_fixed marks a node that is some node's parent; the root's own parent, -1, must not count, or the
    clamp makes it 0 and the root its own parent. With n >= 2 node 1 hangs under the root anyway, so only a tree
    of the root alone shows it: tree.build_tree accepts n = 1 and gives that leaf's path [0]; the mutant made the
    root a non-leaf and the tree had no path.) The reference's retrieve [1, 1, 1], padded to [1, n, depth_max + 1]."""
    root, tokens = torch.tensor([3]), torch.tensor([[7, 8]])
    scores, parents = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1, -1]])
    ref = build_tree(root, tokens, scores, parents, 1)
    got = build_tree_fixed(root, tokens, scores, parents, 1, depth_max=2)
    assert ref.retrieve.tolist() == [[[0]]]
    assert got.retrieve.tolist() == [[[0, -1, -1]]]
    for name in ("tokens", "parents", "mask", "depth", "cand"):
        assert torch.equal(getattr(got, name), getattr(ref, name)), name


def test_sampled_verification_of_the_root_alone_at_a_static_depth_accepts_nothing():
    """catches fixed.py:224 ``c = c.clamp(min=0)`` -> ``clamp(min=1)``
    (a node with fewer than width children reads -1 for the missing ones; the clamp only makes the index safe to
    gather with, the result masked by ``trying``. Clamped to 1 it named node 1, which a tree of the root alone
    does not have: an IndexError where the reference verifies it.) A root-only tree (tree.build_tree allows n = 1)
    at the static depth 2, width 2: nothing to accept, the path [0, -1, -1], the bonus drawn from p at the root,
    p = [0, 0.25, 0.75, 0]: u = 0.5 lands on token 2 (cumulative 0, 0.25, 1, 1)."""
    tree = build_tree_fixed(torch.tensor([3]), torch.tensor([[7, 8]]), torch.tensor([[-1.0, -2.0]]),
                            torch.tensor([[-1, -1]]), 1, depth_max=2)
    p = torch.tensor([[[0.0, 0.25, 0.75, 0.0]]])
    for q in (None, torch.full((1, 1, 4), 0.25)):
        got = sample_verify_fixed(tree, p, q, torch.full((1, 2, 2), 0.5), torch.tensor([0.5]), 2)
        assert got.accepted.tolist() == [0] and got.path.tolist() == [[0, -1, -1]] and got.bonus.tolist() == [2]
    ref = sample_verify(build_tree(torch.tensor([3]), torch.tensor([[7, 8]]), torch.tensor([[-1.0, -2.0]]),
                                   torch.tensor([[-1, -1]]), 1), p, None, torch.Generator().manual_seed(0))
    assert ref.accepted.tolist() == [0] and ref.path.tolist() == [[0]]


def test_draft_tree_fixed_runs_eagerly_unless_told_to_fuse(monkeypatch):
    """catches fixed.py:160 ``fused: bool = False`` -> ``True`` in draft_tree_fixed's signature
    (the default is the eager path every CPU run takes, components.fused.wanted: fused=True compiles each level's
    arithmetic and the tree build with torch.compile, the same tree after minutes of compiling on the CPU; the
    mutant only timed out the mutation run. The engine passes fused itself, so only the default's callers, the
    tests among them, saw it.) Every kernel() call of a default draft is asked for the eager function, and the
    tree is the reference's."""
    from draftsmith.decoding import fixed
    from draftsmith.decoding.tree import draft_tree

    real, asked = fixed.kernel, []
    monkeypatch.setattr(fixed, "kernel", lambda fn, fused: asked.append(fused) or real(fn, False))
    g = torch.Generator().manual_seed(0)
    root, root_lp, table = torch.tensor([1, 2]), torch.randn(2, 8, generator=g).log_softmax(-1), \
        torch.randn(2, 16, 8, generator=g).log_softmax(-1)
    expand = lambda f, t: table.gather(1, f[..., None].expand(-1, -1, 8))
    got = fixed.draft_tree_fixed(root, root_lp, expand, 2, 3, 5)
    ref = draft_tree(root, root_lp, expand, 2, 3, 5)
    assert asked and not any(asked), asked
    for name in ("tokens", "parents", "mask", "depth", "cand"):
        assert torch.equal(getattr(got, name), getattr(ref, name)), name
