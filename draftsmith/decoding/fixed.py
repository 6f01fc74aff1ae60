"""Fixed-shape, sync-free versions of the tree and verification functions, for the device-side step.

The readable reference is tree.py / verify.py: their shapes follow the data (the deepest path, the most
children) and they check what they assume, which needs the host. Here every shape comes from the plan (``steps``,
``topk``, ``n``) and no function reads a tensor's value on the host, so a step runs on the device with no host
synchronisation and can be captured as a CUDA graph. tests/decoding/test_fixed.py proves them equal to the
reference. Randomness enters as uniform draws ``u`` made by the caller (one CPU generator, see engine.Settings).
"""
from __future__ import annotations

import torch
from torch import Tensor

from draftsmith.components.fused import kernel
from draftsmith.decoding.sampling import chunked_topk, greedy_token
from draftsmith.decoding.tree import Tree, select_frontier
from draftsmith.decoding.verify import Verdict


# --- drafting --------------------------------------------------------------------------------------------------
def safe_logprobs(logits: Tensor) -> Tensor:
    # logits: [..., V] draft logits -> log-probs [..., V] float32 in [-inf, 0]; NaN (and anything log_softmax
    # turns into NaN, such as +inf) becomes -inf, so a broken draft only proposes worse tokens (invariant 11)
    x = torch.log_softmax(logits, dim=-1, dtype=torch.float32)
    return torch.nan_to_num(x, nan=float("-inf"), posinf=float("-inf"))


def safe_probs(probs: Tensor) -> Tensor:
    # probs: [..., V] a draft distribution q -> the same q, or uniform in a row that is not a distribution (NaN,
    # inf, negative, all zero). Sampling a draft token from this q and verifying against the same q is lossless.
    ok = torch.isfinite(probs).all(-1, keepdim=True) & (probs >= 0).all(-1, keepdim=True) & \
        (probs.sum(-1, keepdim=True) > 0)
    return torch.where(ok, probs, torch.full_like(probs, 1.0 / probs.shape[-1]))


def sample(probs: Tensor, u: Tensor) -> Tensor:
    # probs: [B, V] non-negative (need not sum to 1); u: [B] uniform in [0, 1) -> [B] token by the inverse CDF.
    # right=True never lands on a zero-probability token: the first index whose cumulative mass exceeds u * total
    c = probs.float().cumsum(-1)                                               # [B, V]
    total = c[:, -1:]
    x = torch.minimum(u.to(c.dtype).unsqueeze(1) * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(c, x, right=True).squeeze(1).clamp(max=probs.shape[-1] - 1)


def _ancestors(parents: Tensor, depth_max: int) -> Tensor:
    # parents: [B, n] (-1 root) -> mask [B, n, n]: self plus every ancestor. M = I + (parent matrix) reaches one
    # level up; squaring doubles the reach, so ceil(log2(depth_max)) batched matmuls replace a loop over nodes
    # (entries count paths, small integers: exact in float32, and only > 0 matters)
    n = parents.shape[1]
    M = torch.nn.functional.one_hot(parents.clamp(min=0), n).float() + torch.eye(n, device=parents.device)
    for _ in range(max(0, depth_max - 1).bit_length()):
        M = M @ M
    return M > 0


def _retrieve_fixed(parents: Tensor, mask: Tensor, depth_max: int) -> Tensor:
    # as tree._retrieve, padded to the static shape [B, n, depth_max + 1]: R = n rows, D = depth_max
    B, n = parents.shape
    idx = torch.arange(n, device=parents.device)
    paths = torch.where(mask, idx, n).sort(dim=-1).values[..., : depth_max + 1]
    paths = torch.nn.functional.pad(paths, (0, depth_max + 1 - paths.shape[-1]), value=n)  # a tree shallower than n
    paths = torch.where(paths == n, -1, paths)
    has_child = torch.zeros(B, n, dtype=torch.bool, device=parents.device)
    has_child.scatter_(1, parents[:, 1:].clamp(min=0), True)
    is_leaf = ~has_child
    leaves = torch.sort((~is_leaf).to(torch.int8), dim=-1, stable=True).indices      # [B, n] leaves first
    rows = paths.gather(1, leaves.unsqueeze(-1).expand(B, n, depth_max + 1))
    valid = idx < is_leaf.sum(-1, keepdim=True)
    return torch.where(valid.unsqueeze(-1), rows, -1)


def tree_from_parents(tokens: Tensor, parents: Tensor, cand: Tensor, depth_max: int, retrieve: bool = True) -> Tree:
    mask = _ancestors(parents, depth_max)
    paths = (_retrieve_fixed(parents, mask, depth_max) if retrieve else
             parents.new_empty(parents.shape[0], 0, depth_max + 1))
    return Tree(tokens, parents, mask, mask.sum(-1) - 1, paths, cand)


def build_tree_fixed(root: Tensor, cand_tokens: Tensor, cand_scores: Tensor, cand_parents: Tensor, n: int,
                     depth_max: int, retrieve: bool = True) -> Tree:
    # tree.build_tree without the host-side check: with safe_logprobs scores never increase from parent to
    # child, and ties go to the lower (earlier, parent-first) index, so every kept child's parent is kept
    B, C = cand_tokens.shape
    keep = select_frontier(cand_scores, n - 1)                                 # [B, n-1]
    dev = cand_tokens.device
    node_of = torch.full((B, C), -1, dtype=torch.long, device=dev)
    node_of.scatter_(1, keep, torch.arange(1, n, device=dev).expand(B, n - 1))
    pc = cand_parents.gather(1, keep)
    pnode = torch.where(pc < 0, 0, node_of.gather(1, pc.clamp(min=0))).clamp(min=0)
    tokens = torch.cat([root.view(B, 1), cand_tokens.gather(1, keep)], dim=1).long()
    minus1 = torch.full((B, 1), -1, dtype=torch.long, device=dev)
    return tree_from_parents(tokens, torch.cat([minus1, pnode], 1), torch.cat([minus1, keep], 1), depth_max, retrieve)


def draft_candidates_fixed(root_logprobs: Tensor, expand, topk: int, steps: int, to_target=None,
                           fused: bool = False, logprobs=None) -> tuple[Tensor, Tensor, Tensor]:
    # tree.draft_candidates in fewer ops (the same candidates, scores and parents): a child's parent is its
    # frontier node repeated topk times, as topk_children lays the children out. Log-probs may be over a reduced
    # draft vocabulary: ``to_target`` maps the chosen ids [B, *] to target ids before anything else sees them.
    # fused: the arithmetic between two expansions runs as compiled kernels (components.fused); logprobs: a
    # function turning the root's and each expansion's output into log-probs (inside the same kernel)
    return _joined(*_levels(root_logprobs, expand, topk, steps, to_target, fused, logprobs))


def _levels(root_logprobs: Tensor, expand, topk: int, steps: int, to_target, fused: bool, logprobs):
    # draft_candidates_fixed level by level: ([tokens], [scores], [parents]) of each level [B, C_level], parents
    # from the second level on (the first level's are the root's, -1: _joined adds them)
    B = root_logprobs.shape[0]
    to_target, logprobs = to_target or _same, logprobs or _same  # chosen here: a compiled _level calls both
    # the top-k: in two stages where compiled (CUDA: a few rows of a vocabulary are ~25 kernels for torch.topk,
    # 2 for chunked_topk), torch's own on the eager path (the CPU: there the chunks cost 2-7x the time)
    select = chunked_topk if fused else _topk
    score, tok = kernel(_level, fused)(None, root_logprobs.unsqueeze(1), topk, to_target, logprobs, select)
    tokens, scores, parents = [tok], [score], []
    offset = 0
    for _ in range(steps - 1):
        frontier, fed, parent_score = kernel(_frontier, fused)(score, tok, topk, offset)
        logp = expand(frontier, fed)                                           # [B, topk, V]
        offset += tok.shape[1]
        score, tok = kernel(_level, fused)(parent_score, logp, topk, to_target, logprobs, select)
        tokens.append(tok)
        scores.append(score)
        parents.append(frontier.unsqueeze(2).expand(B, topk, topk).reshape(B, -1))
    return tokens, scores, parents


def _joined(tokens: list[Tensor], scores: list[Tensor], parents: list[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    # _levels' lists -> candidate tokens, scores, parents [B, C], the first level's parents -1 (the root's children)
    return torch.cat(tokens, 1), torch.cat(scores, 1), torch.cat([torch.full_like(tokens[0], -1), *parents], 1)


def _frontier(score: Tensor, tok: Tensor, topk: int, offset: int) -> tuple[Tensor, Tensor, Tensor]:
    # the last level's best topk: score, tok [B, C] -> their candidate indices (+ offset: index into all candidates),
    # tokens and scores, each [B, topk], in ascending index
    f = select_frontier(score, topk)
    return f + offset, tok.gather(1, f), score.gather(1, f)


def _same(x: Tensor) -> Tensor:
    return x


def _topk(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    return torch.topk(x, k, dim=-1)


def _level(parent_score: Tensor | None, logp: Tensor, topk: int, to_target, logprobs,
           select) -> tuple[Tensor, Tensor]:
    # parent_score [B, k] (None: the root's children, score 0 above them), logp [B, k, V] (logprobs turns it into
    # log-probs) -> the children's scores and target tokens (to_target maps draft ids) [B, k * topk], each parent's
    # topk in a row, chosen by select (x, k) -> values, indices. No branch on the functions: torch 2.11's dynamo
    # reads the truth of a module's bound method as data-dependent control flow
    values, tok = select(logprobs(logp), topk)                                 # [B, k, topk]
    B = logp.shape[0]
    score = values if parent_score is None else parent_score.unsqueeze(-1) + values
    return score.view(B, -1), to_target(tok.view(B, -1))


def draft_tree_fixed(root: Tensor, root_logprobs: Tensor, expand, topk: int, steps: int, n: int,
                     retrieve: bool = True, to_target=None, fused: bool = False, logprobs=None) -> Tree:
    # tree.draft_tree at fixed shapes: retrieve is [B, n, steps + 1], whatever depth the tree reaches; with
    # retrieve=False it has no rows ([B, 0, steps + 1]: the engine's step never reads them, only their width)
    levels = _levels(root_logprobs, expand, topk, steps, to_target, fused, logprobs)
    return kernel(tree_of_levels, fused)(root, *levels, n, steps, retrieve)


def tree_of_levels(root: Tensor, tokens: list[Tensor], scores: list[Tensor], parents: list[Tensor], n: int,
                   depth_max: int, retrieve: bool) -> Tree:
    # build_tree_fixed over _levels' lists, joined inside (one compiled kernel on CUDA, no launch per level)
    return build_tree_fixed(root, *_joined(tokens, scores, parents), n, depth_max, retrieve)


# --- verification ----------------------------------------------------------------------------------------------
def children(parents: Tensor, width: int) -> Tensor:
    # parents: [B, n] -> kids [B, n, width]: children of each node in ascending index, -1 padded
    B, n = parents.shape
    idx = torch.arange(n, device=parents.device)
    is_kid = parents.unsqueeze(1) == idx.view(1, n, 1)
    kids = torch.where(is_kid, idx, n).sort(dim=-1).values[..., :width]
    kids = torch.nn.functional.pad(kids, (0, width - kids.shape[-1]), value=n)  # width > n: a topk past the nodes
    return torch.where(kids == n, -1, kids)


def greedy_verify_fixed(tree: Tree, logits: Tensor) -> Verdict:
    # verify.greedy_verify without the walk: a node is accepted when every token on its path is the target's argmax
    # at its parent; the path ends at the deepest accepted node. Equal to the walk when siblings carry distinct
    # tokens (top-k drafting, chains), so at most one child of a node can match. logits: [B, n, V]
    target = greedy_token(logits)                                              # [B, n] logits.argmax(-1)
    B, n = target.shape
    D = tree.retrieve.shape[-1] - 1
    idx = torch.arange(n, device=target.device)
    ok = tree.tokens == target.gather(1, tree.parents.clamp(min=0))
    ok[:, 0] = True
    good = ~(tree.mask & ~ok.unsqueeze(1)).any(-1)                            # [B, n] whole path matches
    best = torch.where(good, tree.depth * (n + 1) + (n - idx), -1).argmax(-1)  # deepest, then lowest index
    rows = torch.arange(B, device=target.device)
    path = torch.where(tree.mask[rows, best], idx, n).sort(-1).values[:, : D + 1]
    path = torch.nn.functional.pad(path, (0, D + 1 - path.shape[-1]), value=n)
    return Verdict(tree.depth[rows, best], torch.where(path == n, -1, path), target[rows, best])


def sample_verify_fixed(tree: Tree, probs: Tensor, draft_probs: Tensor | None, u: Tensor, u_bonus: Tensor,
                        width: int) -> Verdict:
    # verify.sample_verify with pre-drawn uniforms and no early exits: probs p [B, n, V] (target), draft_probs q
    # [B, n, V] or None (deterministic siblings), u [B, D, width] one draw per (depth, sibling), u_bonus [B];
    # width = most children of a node (topk). The rules, and which distribution is which, are verify.py's.
    p = probs.float()
    q = None if draft_probs is None else draft_probs.float()
    B, n, V = p.shape
    D = tree.retrieve.shape[-1] - 1
    rows = torch.arange(B, device=p.device)
    kids = children(tree.parents, width)
    cur = torch.zeros(B, dtype=torch.long, device=p.device)
    active = torch.ones(B, dtype=torch.bool, device=p.device)
    accepted = torch.zeros_like(cur)
    path = torch.full((B, D + 1), -1, dtype=torch.long, device=p.device)
    path[:, 0] = 0
    r = p[:, 0].clone()
    for d in range(1, D + 1):
        hit = torch.zeros_like(active)
        for s in range(width):
            c = kids[rows, cur, s]
            trying = active & ~hit & (c >= 0)
            c = c.clamp(min=0)
            x = tree.tokens[rows, c]
            rx = r[rows, x]
            if q is None:
                ok = u[:, d - 1, s] < rx
                rejected = r.scatter(1, x.unsqueeze(1), 0.0)
            else:
                qc = q[rows, c]
                ok = u[:, d - 1, s] * qc[rows, x] < rx
                rejected = (r - qc).clamp(min=0)
            ok &= trying
            s_ = rejected.sum(-1, keepdim=True)
            renorm = torch.where(s_ > 0, rejected / s_.clamp_min(torch.finfo(r.dtype).tiny), r)
            r = torch.where((trying & ~ok).unsqueeze(1), renorm, r)
            r = torch.where(ok.unsqueeze(1), p[rows, c], r)
            cur = torch.where(ok, c, cur)
            hit |= ok
        path[:, d] = torch.where(hit, cur, -1)
        accepted += hit
        active &= hit
    return Verdict(accepted, path, sample(r, u_bonus))


# --- commit ----------------------------------------------------------------------------------------------------
def accepted_rows(tree: Tree, verdict: Verdict, handover: Tensor) -> tuple[Tensor, Tensor]:
    # -> new [B, D+1] the committed tokens (path tokens after the root, then the bonus at index accepted; the rest
    # is filler), hidden [B, D+1, H] the hand-over rows of the path (invariant 19: the KV's index map)
    path = verdict.path.clamp(min=0)
    B, D1 = path.shape
    new = tree.tokens.gather(1, path.roll(-1, 1))                              # [B, D+1] next node's token
    new.scatter_(1, verdict.accepted.unsqueeze(1), verdict.bonus.unsqueeze(1).to(new.dtype))
    hidden = handover.gather(1, path.unsqueeze(-1).expand(B, D1, handover.shape[-1]))
    return new, hidden
