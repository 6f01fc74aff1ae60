"""Verification of a draft tree against the target: greedy, and lossless sampling (a chain is a tree with topk=1).

Both walk from the root one depth at a time, vectorised over the batch: at the current node they try its children
in index order, move to the accepted one, and stop where none is accepted; the bonus is the target's own token at
the last accepted node.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from draftsmith.decoding.sampling import as_float
from draftsmith.decoding.tree import Tree


@dataclass(frozen=True)
class Verdict:
    accepted: Tensor  # [B] int64 number of accepted draft tokens (0 <= accepted <= depth of the path)
    path: Tensor      # [B, D+1] int64 node indices root, n1, ..., n_accepted, padded with -1 (the KV "select" map)
    bonus: Tensor     # [B] int64 the target's own next token after the accepted path


def _children(parents: Tensor) -> Tensor:
    # parents: [B, n] -> kids [B, n, W]: children of each node in ascending index, -1 padded; W = most children
    B, n = parents.shape
    idx = torch.arange(n, device=parents.device)
    is_kid = parents.unsqueeze(1) == idx.view(1, n, 1)                         # [B, node, child]
    kids = torch.where(is_kid, idx, n).sort(dim=-1).values                     # [B, n, n]
    W = int(is_kid.sum(-1).max()) if B and n > 1 else 0                        # no rows: no children to try
    kids = kids[..., :W]
    return torch.where(kids == n, -1, kids)


def _start(tree: Tree) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    # -> cur [B] current node, active [B], accepted [B], path [B, D+1], D
    B = tree.tokens.shape[0]
    D = tree.retrieve.shape[-1] - 1
    dev = tree.tokens.device
    path = torch.full((B, D + 1), -1, dtype=torch.long, device=dev)
    path[:, 0] = 0
    zeros = torch.zeros(B, dtype=torch.long, device=dev)
    return zeros, torch.ones(B, dtype=torch.bool, device=dev), zeros.clone(), path, D


def greedy_verify(tree: Tree, logits: Tensor) -> Verdict:
    # logits: [B, n, V] target logits at every node; accept the child whose token is the argmax at the current node
    target = logits.argmax(-1)                                                 # [B, n] target's greedy token
    B, n = target.shape
    idx = torch.arange(n, device=target.device)
    cur, active, accepted, path, D = _start(tree)
    for d in range(1, D + 1):
        want = target.gather(1, cur.unsqueeze(1))                              # [B, 1]
        match = (tree.parents == cur.unsqueeze(1)) & (tree.tokens == want)     # [B, n]
        hit = active & match.any(-1)                                           # [B]
        child = torch.where(match, idx, n).min(-1).values                      # [B] lowest matching child
        cur = torch.where(hit, child, cur)
        path[:, d] = torch.where(hit, child, -1)
        accepted += hit
        active &= hit
    return Verdict(accepted, path, target.gather(1, cur.unsqueeze(1)).squeeze(1))


def _normalise(x: Tensor, fallback: Tensor) -> Tensor:
    # x: [B, V] non-negative -> rows scaled to sum 1; an all-zero row (only from rounding) becomes `fallback`
    s = x.sum(-1, keepdim=True)
    return torch.where(s > 0, x / s.clamp_min(torch.finfo(x.dtype).tiny), fallback)


def sample_verify(
    tree: Tree, probs: Tensor, draft_probs: Tensor | None = None, generator: torch.Generator | None = None
) -> Verdict:
    # probs: [B, n, V] p, the TARGET distribution after each node (temperature/top-p/top-k already applied); the
    #   output must be distributed as p.
    # draft_probs: [B, n, V] or None. q = draft_probs[b, i] is the DRAFT distribution node i's token was sampled
    #   from (row 0 unused). Lossless for a sampled chain, and for siblings drawn independently from their q
    #   (SpecInfer's multi-candidate rule). None: the children are deterministic top-k picks.
    # r below is the residual target distribution at the current node: p there, minus what rejections removed.
    p = as_float(probs)
    q = None if draft_probs is None else as_float(draft_probs)
    B, n, V = p.shape
    rows = torch.arange(B, device=p.device)
    kids = _children(tree.parents)                                             # [B, n, W]
    cur, active, accepted, path, D = _start(tree)
    r = p[:, 0].clone()                                                        # [B, V]
    for d in range(1, D + 1):
        hit = torch.zeros_like(active)
        for s in range(kids.shape[-1]):
            c = kids[rows, cur, s]                                             # [B] s-th child, -1 if none
            trying = active & ~hit & (c >= 0)
            if not bool(trying.any()):
                break
            c = c.clamp(min=0)
            x = tree.tokens[rows, c]                                           # [B] proposed token
            rx = r[rows, x]
            u = torch.rand(B, generator=generator, device=p.device, dtype=p.dtype)
            if q is None:
                # accept x with probability r(x); else r(x) <- 0, renormalise, and try the next sibling
                ok = u < rx
                rejected = r.scatter(1, x.unsqueeze(1), 0.0)
            else:
                # x ~ q: accept with min(1, r(x) / q(x)) (written without the division); else r <- norm(max(r - q, 0))
                qc = q[rows, c]                                                # [B, V]
                ok = u * qc[rows, x] < rx
                rejected = (r - qc).clamp(min=0)
            ok &= trying
            r = torch.where((trying & ~ok).unsqueeze(1), _normalise(rejected, fallback=r), r)
            r = torch.where(ok.unsqueeze(1), p[rows, c], r)                    # accepted: move on, fresh p
            cur = torch.where(ok, c, cur)
            hit |= ok
        path[:, d] = torch.where(hit, cur, -1)
        accepted += hit
        active &= hit
        if not bool(active.any()):
            break
    # stopped after rejections: r is the residual; reached a leaf: r is p at the leaf
    bonus = torch.multinomial(r, 1, generator=generator).squeeze(1)
    return Verdict(accepted, path, bonus)
