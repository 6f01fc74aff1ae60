"""Running the draft model over a tree being built: the state the tree functions do not hold.

Every expanded node is written to the draft pool as a pending (scratch) row; the catch-up forward after
verification replaces that reservation, so no tree node ever stays in the draft's cache (invariant 20)."""
from __future__ import annotations

import torch

from draftsmith.decoding.batching import kv_batch


class TreeExpander:
    """``expand(frontier_cand [B, k], tokens [B, k]) -> logits [B, k, V]`` for :func:`draft_candidates`.

    Candidates of level 0 are the root's children; the children of the j-th call are appended in frontier order
    (k per frontier node), which is how :func:`topk_children` lays them out, so each candidate's parent state is
    one ``repeat_interleave`` away."""

    def __init__(self, run, seqs: list[int], feed0: torch.Tensor, k: int, steps: int):
        # run(ids [B, T], hidden [B, T, H], kv, pos, from_target=False) -> (feed [B, T, H], logits [B, T, V])
        # feed0: [B, H] the draft's state after the root
        self.run, self.seqs, self.k = run, seqs, k
        B, H = feed0.shape
        self.scratch = max(1, k * (steps - 1))
        self.parent_feed = feed0[:, None].expand(B, k, H)                                 # [B, C, H]
        self.parent_anc = torch.zeros(B, k, self.scratch, dtype=torch.bool)              # [B, C, P]
        self.calls = 0

    def __call__(self, frontier: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        B, k = frontier.shape
        j = self.calls
        fcpu = frontier.cpu()
        hidden = self.parent_feed[torch.arange(B)[:, None], frontier]                     # [B, k, H]
        rows = j * k + torch.arange(k)                                                    # scratch index per node
        anc = self.parent_anc[torch.arange(B)[:, None], fcpu].clone()                     # [B, k, P]
        anc[:, torch.arange(k), rows] = True
        kv, pos = kv_batch(self.run.pool, self.seqs, [(j + 1) * k] * B, rows.expand(B, k), anc,
                           torch.full((B, k), j), self.run.device)
        feed, logits = self.run(tokens, hidden, kv, pos, from_target=False)
        self.parent_feed = torch.cat([self.parent_feed, feed.repeat_interleave(self.k, 1)], 1)
        self.parent_anc = torch.cat([self.parent_anc, anc.repeat_interleave(self.k, 1)], 1)
        self.calls += 1
        return logits
