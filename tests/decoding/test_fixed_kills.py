"""Mutation survivors of decoding/fixed.py: sampled verification at the edges the lossless tests never draw
(u = 0 against a zero-probability token, a residual with no mass left, which uniform each depth reads), the
candidate parents of the drafting itself (not only the tree built from them), and the defaults of the tree
builders, against the readable reference (tree.py) on hand-built inputs."""
import torch
from hypothesis import given

import test_tree
from draftsmith.decoding import fixed
from draftsmith.decoding.fixed import (
    accepted_rows, build_tree_fixed, draft_candidates_fixed, greedy_verify_fixed, safe_probs, sample,
    sample_verify_fixed, tree_from_parents,
)
from draftsmith.decoding.sampling import chunked_topk
from draftsmith.decoding.tree import build_tree, chain_tree, draft_candidates, max_tree_nodes
from draftsmith.decoding.verify import Verdict

V = 4
# root -> candidates with tokens 2, 0, 5 (in that order), then 1, 3 under the first; best first
_CAND = (torch.tensor([[2, 0, 5, 1, 3]]), torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0]]),
         torch.tensor([[-1, -1, -1, 0, 0]]))


def _verify(tree, p, q, u, u_bonus, width=1):
    B = tree.tokens.shape[0]
    return sample_verify_fixed(tree, p.expand(B, -1, -1), None if q is None else q.expand(B, -1, -1), u,
                               torch.full((B,), u_bonus), width)


def test_safe_probs_judges_each_row_of_a_batch_of_rows_on_its_own():
    # catches fixed.py:30 isfinite(probs).all(-1) -> all(1), (probs >= 0).all(-1) -> all(1), :31 probs.sum(-1)
    # -> sum(1), :32 1.0 / probs.shape[-1] -> 1.0 / probs.shape[1] (probs is [..., V]; on the [B, V] rows the engine
    # passes, dim 1 is the last one, but a [B, n, V]
    # batch would mix the n rows of a sequence, and one bad row would spoil its neighbours or hide itself)
    nan = float("nan")
    probs = torch.tensor([[[0.2, 0.3, 0.5], [nan, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.1, 0.1, 0.8]]])
    uniform = [1 / 3] * 3
    want = torch.tensor([[[0.2, 0.3, 0.5], uniform], [uniform, [0.1, 0.1, 0.8]]])
    assert torch.allclose(safe_probs(probs), want)
    assert torch.allclose(torch.stack([safe_probs(row) for row in probs]), want)


def test_sampling_stays_inside_the_vocabulary_whatever_the_row():
    # catches fixed.py:41 clamp(max=probs.shape[-1] - 1) -> clamp(max=probs.shape[-1] + 1 / - 0)
    # (a row with no usable mass, all zero, NaN or +inf, puts x at or past the last cumulative sum and
    # searchsorted answers V, one past the last id; the clamp keeps it a token the embedding can look up)
    nan, inf = float("nan"), float("inf")
    rows = torch.tensor([[0.0, 0.0, 0.0], [nan, 1.0, 1.0], [1.0, 1.0, inf], [1.0, nan, 1.0]])
    for u in (0.0, 0.5, 1 - 2**-24):
        got = sample(rows, torch.full((4,), u))
        assert ((got >= 0) & (got < 3)).all(), (u, got.tolist())


def test_greedy_verification_that_accepts_the_whole_depth_keeps_the_whole_path():
    # catches fixed.py:170 .values[:, : D + 1] -> .values[:, : D - 1]
    # (test_fixed compares against the reference with retrieve padded two levels deeper than the tree, so no path
    # there reaches the static depth D; here a chain of depth D = 2 is accepted to its leaf)
    tree = chain_tree(torch.tensor([0, 0]), torch.tensor([[1, 2], [1, 3]]))
    logits = torch.nn.functional.one_hot(torch.tensor([[1, 2, 0], [1, 2, 0]]), V).float()   # argmax: 1, 2, 0
    v = greedy_verify_fixed(tree, logits)
    assert v.accepted.tolist() == [2, 1] and v.bonus.tolist() == [0, 2]
    assert v.path.tolist() == [[0, 1, 2], [0, 1, -1]]


def test_u_zero_never_accepts_a_token_the_target_rules_out():
    # catches fixed.py:201 u < rx -> u <= rx and :205 u * q(x) < rx -> u * q(x) <= rx
    # (accept x with probability r(x): a draw of exactly 0 against r(x) = 0 must still reject; the lossless tests
    # draw u from a generator and never hit 0 exactly)
    tree = chain_tree(torch.tensor([0]), torch.tensor([[2]]))                 # root -> token 2
    p = torch.tensor([[[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]])          # the target never says 2 at the root
    for q in (None, torch.full((1, 2, V), 1 / V)):                           # top-k sibling, and drawn from q
        v = _verify(tree, p, q, torch.zeros(1, 1, 1), 0.0)
        assert v.accepted.tolist() == [0] and v.path.tolist() == [[0, -1]], q
        assert v.bonus.tolist() == [0]                                       # drawn from p at the root, not 3


def test_a_rejection_that_leaves_no_residual_keeps_the_distribution():
    # catches fixed.py:209 s_ > 0 -> s_ >= 0
    # (r <- norm(max(r - q, 0)): when r <= q everywhere the residual is all zero (rounding does it too); r must stay
    # as it was, not become the zero vector, from which the bonus is the last token whatever its probability)
    tree = chain_tree(torch.tensor([0]), torch.tensor([[2]]))
    p = torch.tensor([[[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]])
    q = p.clone()
    q[0, 1] = p[0, 0]                     # the child's q equals r at the root, and neither allows its token 2
    for u_bonus in (0.0, 0.4, 0.9):
        v = _verify(tree, p, q, torch.full((1, 1, 1), 0.5), u_bonus)
        assert v.accepted.tolist() == [0] and v.bonus.tolist() == [int(u_bonus >= 0.5)]


def test_each_depth_reads_its_own_uniform():
    # catches fixed.py:201 u[:, d - 1, s] -> u[:, d - 2, s] and :205 likewise
    # (u [B, D, width] holds one draw per (depth, sibling), in the layout engine.verify fills and test_drafter
    # pins; reading depth d's draw at depth d + 1 is a permutation of iid draws, so no distribution test sees it)
    tree = chain_tree(torch.tensor([0]), torch.tensor([[1, 2]]))              # root -> 1 -> 2, D = 2
    p = torch.tensor([[[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5], [1.0, 0.0, 0.0, 0.0]]])
    q_one_hot = torch.eye(V)[[0, 1, 2]].unsqueeze(0)                         # each node drawn for sure: x ~ q
    for q in (None, q_one_hot):                                               # both accept x iff u < r(x) = 0.5
        accept_then_reject = _verify(tree, p, q, torch.tensor([[[0.1], [0.9]]]), 0.0)
        assert accept_then_reject.accepted.tolist() == [1] and accept_then_reject.path.tolist() == [[0, 1, -1]]
        reject_first = _verify(tree, p, q, torch.tensor([[[0.9], [0.1]]]), 0.0)
        assert reject_first.accepted.tolist() == [0] and reject_first.path.tolist() == [[0, -1, -1]]


@given(test_tree.drafts())
def test_candidates_equal_the_reference(case):
    # catches fixed.py:105 torch.full_like(tok, -1) -> torch.full_like(tok, -2 / 0 / 1)
    # (the first level's parent is -1, "child of the root", as tree.draft_candidates says; build_tree_fixed only
    # asks pc < 0, so the trees stay equal and only the candidates themselves show it)
    _, root_lp, table, k, steps, _ = case
    got = draft_candidates_fixed(root_lp, test_tree._expand(table, []), k, steps)
    ref = draft_candidates(root_lp, test_tree._expand(table, []), k, steps)
    for name, g, r in zip(("tokens", "scores", "parents"), got, ref):
        assert torch.equal(g, r), name


def test_the_tree_builders_give_retrieve_rows_by_default():
    # catches fixed.py:71 tree_from_parents(..., retrieve=True) -> False and :79 build_tree_fixed(..., retrieve=True)
    # -> False (called as tree.build_tree is, the fixed builders give the reference's tree, root-to-leaf rows too,
    # padded to n rows; no caller in the package leaves retrieve out, so only a direct call sees the default)
    cand = _CAND
    ref = build_tree(torch.tensor([7]), *cand, n=5)
    rows = [[0, 2, -1], [0, 3, -1], [0, 1, 4], [-1, -1, -1], [-1, -1, -1]]   # the reference's, padded to n rows
    assert ref.retrieve.tolist() == [rows[:3]]
    got = build_tree_fixed(torch.tensor([7]), *cand, 5, 2)
    for name in ("tokens", "parents", "mask", "depth", "cand"):
        assert torch.equal(getattr(got, name), getattr(ref, name)), name
    assert got.retrieve.tolist() == [rows]
    again = tree_from_parents(ref.tokens, ref.parents, ref.cand, 2)
    assert again.retrieve.tolist() == [rows]
    assert torch.equal(again.mask, ref.mask) and torch.equal(again.depth, ref.depth)


def test_accepted_rows_are_the_path_tokens_then_the_bonus_and_the_path_hand_over():
    # catches fixed.py:226 path.roll(-1, 1) -> roll(1, 1) / roll(-2, 1) / roll(-1, 0), :227 the bonus scattered at
    # the wrong index, :228 handover.gather(1, ...) -> gather(0 / 2, ...) and handover.shape[-1] -> shape[-2]
    # (test_fixed never calls accepted_rows; the engine's end-to-end tests do, minutes later. Row b commits the
    # tokens of path[1..accepted] then the bonus; its hand-over rows are those of path[0..accepted], the KV's map)
    tree = build_tree(torch.tensor([7, 6]), *(c.expand(2, -1) for c in _CAND), n=5)   # tokens [r, 2, 0, 5, 1]
    verdict = Verdict(accepted=torch.tensor([2, 1]), path=torch.tensor([[0, 1, 4], [0, 3, -1]]),
                      bonus=torch.tensor([9, 8]))
    handover = torch.arange(2 * 5 * 3).view(2, 5, 3)                          # B = 2, n = 5 rows of H = 3
    new, hidden = accepted_rows(tree, verdict, handover)
    assert new.shape == (2, 3) and hidden.shape == (2, 3, 3)
    assert new[0].tolist() == [2, 1, 9] and new[1, :2].tolist() == [5, 8]     # past accepted + 1: filler
    assert hidden[0].tolist() == handover[0, [0, 1, 4]].tolist()
    assert hidden[1, :2].tolist() == handover[1, [0, 3]].tolist()


def test_compiled_levels_select_in_two_stages_and_eager_ones_with_torch_topk(monkeypatch):
    # the compiled levels (fused, CUDA) take the top-k with sampling.chunked_topk, the eager ones (the CPU) with
    # torch.topk: the same candidates on distinct log-probs, over a width of several chunks and a part of one
    seen = []

    def kernel(fn, fused):
        def run(*args):
            if fn is fixed._level:
                seen.append((fused, args[-1]))
            return fn(*args)
        return run

    monkeypatch.setattr(fixed, "kernel", kernel)
    gen = torch.Generator().manual_seed(3)
    B, V, k, steps = 2, 600, 3, 3
    root_lp = torch.randn(B, V, generator=gen, dtype=torch.float64).log_softmax(-1)
    table = torch.randn(B, max_tree_nodes(k, steps) - 1, V, generator=gen, dtype=torch.float64).log_softmax(-1)
    want = draft_candidates_fixed(root_lp, test_tree._expand(table, []), k, steps)
    got = draft_candidates_fixed(root_lp, test_tree._expand(table, []), k, steps, fused=True)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert {s for f, s in seen if f} == {chunked_topk} and {s for f, s in seen if not f} == {fixed._topk}
    assert len(seen) == 2 * steps
