"""Running the draft model over a tree being built: the state the tree functions do not hold.

Every expanded node is written to the draft pool past the committed length, as scratch; the catch-up forward after
verification overwrites that region and only the committed tokens advance the length, so no tree node ever stays
in the draft's cache (invariant 20). Everything here stays on the device, at shapes fixed by the plan."""
from __future__ import annotations

import torch


class TreeExpander:
    """``expand(frontier_cand [B, k], tokens [B, k]) -> logits [B, k, V]`` for :func:`draft_candidates`.

    Candidates of level 0 are the root's children; the children of the j-th call are appended in frontier order
    (k per frontier node), which is how :func:`topk_children` lays them out, so each candidate's parent state is
    one ``repeat_interleave`` away."""

    def __init__(self, run, feed0: torch.Tensor, k: int, steps: int, active: torch.Tensor):
        # run(ids [B, T], hidden [B, T, H], rows, rel_pos, rel_mask, from_target=False) -> (feed, logits [B, T, V])
        # feed0: [B, H] the draft's state after the root; active: [B] rows still decoding (others write nothing)
        self.run, self.k, self.active = run, k, active
        B, H = feed0.shape
        dev = feed0.device
        self.scratch = max(1, k * (steps - 1))
        self.parent_feed = feed0[:, None].expand(B, k, H)                                 # [B, C, H]
        self.parent_anc = torch.zeros(B, k, self.scratch, dtype=torch.bool, device=dev)  # [B, C, P]
        self.batch = torch.arange(B, device=dev)[:, None]
        self.calls = 0

    def __call__(self, frontier: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        B, k = frontier.shape
        j, dev = self.calls, frontier.device
        hidden = self.parent_feed[self.batch, frontier]                                   # [B, k, H]
        rows = j * k + torch.arange(k, device=dev)                                        # scratch offset per node
        anc = self.parent_anc[self.batch, frontier].clone()                               # [B, k, P]
        anc[:, torch.arange(k, device=dev), rows] = True
        write = torch.where(self.active[:, None], rows, -1)                               # [B, k]
        feed, logits = self.run(tokens, hidden, write, torch.full((B, k), j, device=dev), anc, from_target=False)
        self.parent_feed = torch.cat([self.parent_feed, feed.repeat_interleave(self.k, 1)], 1)
        self.parent_anc = torch.cat([self.parent_anc, anc.repeat_interleave(self.k, 1)], 1)
        self.calls += 1
        return logits
