"""Mutation survivors of decoding/verify.py and decoding/sampling.py: a uniform of exactly 0 against a token the
target rules out (top-k siblings), and the temperature -> 0 limit at the smallest temperature the checks pass.

The other survivors are equivalent on the inputs these functions take (B >= 1 rows; a tree has its root):
- tree.py: _mask_from_parents looping from node 0 (the root's parent -1 reads row n-1, still all False, before the
  diagonal is set); node_of filled with -2 instead of -1 (only ``< 0`` is asked of it); retrieve sliced to D+2
  columns (the gather takes the first D+1); and dim=-1 -> dim=1 in select_frontier, is_leaf.sum, the leaf sort
  and n_leaves.unsqueeze, all on 2-D [B, C] / [B, n] or 1-D [B] tensors.
- verify.py: _children's ``n > 1`` guard as ``n >= 1`` / ``n > 0`` or its 0 as 1 (n = 1 has no children either
  way and no depth to walk; only an empty batch B = 0, which build_tree cannot make, would reach the max of an
  empty tensor), padding children with -2 (only ``c >= 0`` and a clamp read them), ``c >= 0`` as ``c > 0`` /
  ``c >= 1`` and ``clamp(min=1)`` (node 0 is nobody's child; a clamped -1 lane is masked out by ``trying``), and
  dim=-1 -> dim=1 on the 2-D [B, n] match and [B, V] residual.
- sampling.py: ``0 < top_k <= V`` (top_k = V masks below the smallest value: nothing), and _shifted filling a
  non-finite row maximum with 1 instead of 0 (such a row holds +inf or NaN, whose softmax is NaN either way, or is
  all -inf, which stays -inf).
"""
import pytest
import torch

from draftsmith.decoding.sampling import logprobs_for_drafting, target_probs
from draftsmith.decoding.tree import draft_tree
from draftsmith.decoding.verify import sample_verify


def _zero_uniforms(calls: list):
    # stands in for torch.rand inside sample_verify: every uniform is exactly 0, which a generator almost never draws
    def rand(*size, generator=None, device=None, dtype=None, **kw):
        calls.append(size)
        return torch.zeros(*size, device=device, dtype=dtype)
    return rand


def _walk_u0(parents: list, tokens: list, p: torch.Tensor) -> tuple[list, bool]:
    # the verdict when every uniform is 0, for top-k siblings (distinct tokens): u < r(x) accepts iff r(x) > 0, and
    # a rejection only zeroes a token whose r is already 0, so at each node the first child (in index order) whose
    # token p allows is taken. p: [n, V]. -> (path of nodes from the root, whether some child was refused)
    path, refused = [0], False
    while kids := [c for c in range(len(parents)) if parents[c] == path[-1]]:
        allowed = [c for c in kids if p[path[-1], tokens[c]] > 0]
        refused |= not allowed or allowed[0] != kids[0]
        if not allowed:
            break
        path.append(allowed[0])
    return path, refused


def test_a_zero_uniform_never_accepts_a_child_the_target_rules_out():
    # catches verify.py:101 u < rx -> u <= rx
    # (accept x with probability r(x): a draw of exactly 0 against r(x) = 0 must still reject. torch.rand draws 0
    # with probability 2**-24, so the lossless tests never meet it; here every draw is 0, and the verdict must be
    # the walk that takes the first child whose token the target allows)
    gen = torch.Generator().manual_seed(0)
    B, V, topk, steps, n = 32, 5, 3, 3, 9
    table = torch.log_softmax(torch.randn(B, 1 + topk + (steps - 1) * topk * topk, V, generator=gen), -1)

    def expand(idx, tok):  # idx, tok: [B, k] -> [B, k, V], the table row of candidate idx (row 0 is the root's)
        return table.gather(1, idx.unsqueeze(-1).expand(-1, -1, V) + 1)

    tree = draft_tree(torch.randint(V, (B,), generator=gen), table[:, 0], expand, topk, steps, n)
    allowed = torch.rand(B, n, V, generator=gen) < 0.5                        # [B, n, V] tokens the target allows
    allowed[..., 0] |= ~allowed.any(-1)                                       # at least one per row
    p = torch.softmax(torch.randn(B, n, V, generator=gen), -1) * allowed
    p = p / p.sum(-1, keepdim=True)                                           # [B, n, V]
    calls = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch, "rand", _zero_uniforms(calls))
        v = sample_verify(tree, p, None, gen)
    assert calls                                                              # the uniforms were ours
    refusals = 0
    for b in range(B):
        path, refused = _walk_u0(tree.parents[b].tolist(), tree.tokens[b].tolist(), p[b])
        refusals += refused
        assert v.accepted[b] == len(path) - 1
        assert v.path[b].tolist() == path + [-1] * (v.path.shape[1] - len(path))
        assert p[b, path[-1], v.bonus[b]] > 0
    assert refusals > B // 4                                                  # the case the test is about occurs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature", [2.0 ** -126, 1e-39])
def test_the_smallest_temperatures_give_the_argmax_limit_on_a_batch(dtype, temperature):
    # catches sampling.py:18 x - top -> x + top
    # (softmax is shift-invariant, so any shift passes at T ~ 1; only the shift by the row maximum keeps the quotient
    # by a tiny T at 0 for the maximum and -inf below it, where x + top overflows to inf and softmax gives NaN.
    # 2**-126 is the smallest temperature arguments.py lets through, 1e-39 a float32 subnormal. The limit as T -> 0
    # is uniform over the row's maxima: one token, or the tied ones)
    logits = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(1)) * 4 + 8  # [B, n, V] maxima far from 0
    logits[1, 2, 4] = logits[1, 2].max()                                      # a tie at the top
    logits = logits.to(dtype)
    top = logits.float() == logits.float().amax(-1, keepdim=True)             # [B, n, V]
    limit = top / top.sum(-1, keepdim=True)
    assert int(top.sum()) == 2 * 3 + 1
    probs = target_probs(logits, temperature)
    assert not probs.isnan().any() and torch.allclose(probs, limit)
    for top_k, top_p in ((3, 1.0), (0, 0.9)):                                 # the filters keep the maxima
        assert torch.allclose(target_probs(logits, temperature, top_p=top_p, top_k=top_k), limit)
    logprobs = logprobs_for_drafting(logits, temperature)                    # below the maxima: -inf or ~-1e38
    assert not logprobs.isnan().any() and torch.allclose(logprobs.exp(), limit)
    assert torch.allclose(logprobs[top], limit[top].log())
