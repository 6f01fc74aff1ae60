"""EAGLE-2 dynamic draft trees as pure tensor functions (no model inside).

A candidate is a (token, score, parent) triple, score = cumulative draft log-prob from the root. Drafting expands
the `topk` best candidates of the last level at each depth; `build_tree` then keeps the best `n - 1` candidates
overall. Because a child's score is its parent's plus a log-prob <= 0 and ties go to the lower (earlier created)
candidate index, every kept child's parent is kept too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from draftsmith.specs.resolve import most_draft_tokens as max_tree_nodes   # the spec's bound on draft_tokens


@dataclass(frozen=True)
class Tree:
    tokens: Tensor    # [B, n] int64 token ids; tokens[:, 0] is the root (last sampled, not yet verified token)
    parents: Tensor   # [B, n] int64 parent node index, -1 for the root; parents[:, i] < i (topological order)
    mask: Tensor      # [B, n, n] bool, mask[b, i, j] = j is i or an ancestor of i
    depth: Tensor     # [B, n] int64, = mask.sum(-1) - 1
    retrieve: Tensor  # [B, R, D+1] int64 root-to-leaf node paths, -1 padded at the end; one row per leaf (ordered
                      # by leaf index), then whole rows of -1 to pad R across the batch; D = max depth in the batch
    cand: Tensor      # [B, n] int64 index of each node in the candidate list it was chosen from, -1 for the root


def topk_children(parent_scores: Tensor, logprobs: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    # parent_scores: [B, F] cumulative log-prob of each frontier node; logprobs: [B, F, V] draft log-probs there
    # returns tokens [B, F*k], scores [B, F*k] (parent score + child log-prob), parent [B, F*k] (index into F);
    # children of frontier node f sit at f*k .. f*k+k-1 in descending log-prob
    B, F, V = logprobs.shape
    values, tokens = torch.topk(logprobs, k, dim=-1, sorted=True)            # [B, F, k]
    scores = parent_scores.unsqueeze(-1) + values                              # [B, F, k]
    parent = torch.arange(F, device=logprobs.device).repeat_interleave(k)     # [F*k]
    return tokens.reshape(B, F * k), scores.reshape(B, F * k), parent.expand(B, F * k).contiguous()


def select_frontier(scores: Tensor, k: int) -> Tensor:
    # scores: [B, C] -> [B, k] indices of the k best, ties to the lower index (stable sort), ascending
    if not 0 <= k <= scores.shape[-1]:
        raise ValueError(f"cannot select {k} of {scores.shape[-1]} candidates")
    order = torch.sort(scores, dim=-1, descending=True, stable=True).indices  # [B, C]
    return order[:, :k].sort(dim=-1).values


def _mask_from_parents(parents: Tensor) -> Tensor:
    # parents: [B, n] with parents[:, i] < i -> mask [B, n, n]: row i = row of its parent plus i itself
    B, n = parents.shape
    rows = torch.arange(B, device=parents.device)
    mask = torch.zeros(B, n, n, dtype=torch.bool, device=parents.device)
    mask[:, 0, 0] = True
    for i in range(1, n):
        mask[:, i] = mask[rows, parents[:, i]]
        mask[:, i, i] = True
    return mask


def _retrieve(parents: Tensor, mask: Tensor, depth: Tensor) -> Tensor:
    # parents: [B, n], mask: [B, n, n], depth: [B, n] -> [B, R, D+1] one root-to-leaf path per leaf
    B, n = parents.shape
    D = int(depth.max())
    idx = torch.arange(n, device=parents.device)
    # ancestors have lower indices than their descendants, so sorting a mask row's indices is root-to-leaf order
    paths = torch.where(mask, idx, n).sort(dim=-1).values[..., : D + 1]       # [B, n, D+1], n = padding
    paths = torch.where(paths == n, -1, paths)
    has_child = torch.zeros(B, n, dtype=torch.bool, device=parents.device)
    has_child.scatter_(1, parents[:, 1:].clamp(min=0), True)
    is_leaf = ~has_child                                                       # [B, n]
    n_leaves = is_leaf.sum(-1)                                                 # [B]
    R = int(n_leaves.max())
    leaves = torch.sort((~is_leaf).to(torch.int8), dim=-1, stable=True).indices[:, :R]  # [B, R] leaves first
    rows = paths.gather(1, leaves.unsqueeze(-1).expand(B, R, D + 1))           # [B, R, D+1]
    valid = torch.arange(R, device=parents.device) < n_leaves.unsqueeze(-1)    # [B, R]
    return torch.where(valid.unsqueeze(-1), rows, -1)


def _tree(tokens: Tensor, parents: Tensor, cand: Tensor) -> Tree:
    mask = _mask_from_parents(parents)
    depth = mask.sum(-1) - 1
    return Tree(tokens, parents, mask, depth, _retrieve(parents, mask, depth), cand)


def build_tree(root: Tensor, cand_tokens: Tensor, cand_scores: Tensor, cand_parents: Tensor, n: int) -> Tree:
    # root: [B]; cand_*: [B, C] in creation order (parents before children), cand_parents -1 = child of the root
    # keeps the n-1 best candidates (stable on ties), in candidate order, as nodes 1..n-1 under the root node 0
    B, C = cand_tokens.shape
    if n < 1 or C < n - 1:
        raise ValueError(f"cannot build a tree of {n} nodes from {C} candidates")
    keep = select_frontier(cand_scores, n - 1)                                 # [B, n-1] ascending cand index
    dev = cand_tokens.device
    node_of = torch.full((B, C), -1, dtype=torch.long, device=dev)             # candidate index -> node index
    node_of.scatter_(1, keep, torch.arange(1, n, device=dev).expand(B, n - 1))
    pc = cand_parents.gather(1, keep)                                          # [B, n-1] parent candidate
    pnode = torch.where(pc < 0, 0, node_of.gather(1, pc.clamp(min=0)))         # [B, n-1] parent node, -1 = dropped
    if bool((pnode < 0).any()):
        raise ValueError("a kept candidate's parent was dropped: scores must not increase from parent to child")
    tokens = torch.cat([root.view(B, 1), cand_tokens.gather(1, keep)], dim=1)
    parents = torch.cat([torch.full((B, 1), -1, dtype=torch.long, device=dev), pnode], dim=1)
    cand = torch.cat([torch.full((B, 1), -1, dtype=torch.long, device=dev), keep], dim=1)
    return _tree(tokens.long(), parents, cand)


def chain_tree(root: Tensor, tokens: Tensor) -> Tree:
    # root: [B], tokens: [B, k] -> chain of n = k+1 nodes; node i's parent is i-1
    B, k = tokens.shape
    idx = torch.arange(k + 1, device=tokens.device)
    mask = torch.ones(k + 1, k + 1, dtype=torch.bool, device=tokens.device).tril().expand(B, -1, -1)
    return Tree(
        tokens=torch.cat([root.view(B, 1), tokens], dim=1).long(),
        parents=(idx - 1).expand(B, -1).contiguous(),
        mask=mask.contiguous(),
        depth=idx.expand(B, -1).contiguous(),
        retrieve=idx.expand(B, 1, -1).contiguous(),
        cand=(idx - 1).expand(B, -1).contiguous(),
    )


def draft_candidates(
    root_logprobs: Tensor, expand: Callable[[Tensor, Tensor], Tensor], topk: int, steps: int
) -> tuple[Tensor, Tensor, Tensor]:
    # root_logprobs: [B, V]; expand(frontier_cand_idx [B, k], frontier_tokens [B, k]) -> logprobs [B, k, V]
    # returns cand_tokens, cand_scores, cand_parents: [B, C], C = topk + (steps-1)*topk^2, in creation order
    B, V = root_logprobs.shape
    zero = root_logprobs.new_zeros(B, 1)
    tok, score, _ = topk_children(zero, root_logprobs.unsqueeze(1), topk)      # [B, topk] depth 1
    tokens, scores, parents = [tok], [score], [torch.full_like(tok, -1)]
    offset = 0                                                                 # cand index of the last level's first
    for _ in range(steps - 1):
        f = select_frontier(score, topk)                                       # [B, topk] index into last level
        frontier = f + offset                                                  # [B, topk] candidate index
        logp = expand(frontier, tok.gather(1, f))
        if logp.shape != (B, topk, V):
            raise ValueError(f"expand returned {tuple(logp.shape)}, expected {(B, topk, V)}")
        offset += tok.shape[1]
        tok, score, p = topk_children(score.gather(1, f), logp, topk)          # [B, topk*topk]
        tokens.append(tok)
        scores.append(score)
        parents.append(frontier.gather(1, p))
    return torch.cat(tokens, 1), torch.cat(scores, 1), torch.cat(parents, 1)


def draft_tree(
    root: Tensor, root_logprobs: Tensor, expand: Callable[[Tensor, Tensor], Tensor], topk: int, steps: int, n: int
) -> Tree:
    # root: [B] root tokens; root_logprobs: [B, V] draft log-probs after the root; steps = tree depth (levels
    # 1..steps, steps-1 calls of expand); n = nodes in the tree, root included
    if topk < 1 or steps < 1:
        raise ValueError(f"topk and steps must be >= 1, got topk={topk}, steps={steps}")
    if not 2 <= n <= max_tree_nodes(topk, steps):
        raise ValueError(f"n={n} nodes: n - 1 must be in 1..{max_tree_nodes(topk, steps) - 1} for topk={topk}, "
                         f"steps={steps}")
    if topk == 1 and n != steps + 1:
        raise ValueError(f"a chain (topk=1) of {steps} steps has n = {steps + 1} nodes, got n={n}")
    return build_tree(root, *draft_candidates(root_logprobs, expand, topk, steps), n)
