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
        self.run, self.k = run, k
        B, H = feed0.shape
        dev = feed0.device
        P = max(1, k * (steps - 1))                                    # scratch rows: k per expansion
        C = k + (steps - 1) * k * k                                    # candidates, as draft_candidates makes them
        # the state (and scratch ancestry) after each candidate's parent, filled level by level
        self.parent_feed = feed0.new_empty(B, C, H)
        self.parent_feed[:, :k] = feed0[:, None]
        self.parent_anc = torch.zeros(B, C, P, dtype=torch.bool, device=dev)
        self.filled = k
        self.batch = torch.arange(B, device=dev)[:, None]
        self.node = torch.arange(k, device=dev)
        self.cols = torch.arange(P, device=dev)
        self.inactive = ~active[:, None]
        self.calls = 0

    def __call__(self, frontier: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        B, k = frontier.shape
        j = self.calls
        rows = self.node + j * k                                                          # scratch offset per node
        hidden = self.parent_feed[self.batch, frontier]                                   # [B, k, H]
        # [B, k, P]: the parent's scratch ancestry plus the node's own row (no indexed write of a host scalar:
        # that is a host-to-device copy, a synchronisation, which a CUDA graph cannot capture)
        anc = self.parent_anc[self.batch, frontier] | (rows[:, None] == self.cols)
        feed, logits = self.run(tokens, hidden, rows.expand(B, k).masked_fill(self.inactive, -1),
                                rows.new_full((B, k), j), anc, from_target=False)
        end = self.filled + k * self.k
        # each new node's state, once per child it will have (repeat_interleave, written as a broadcast copy)
        self.parent_feed[:, self.filled:end].unflatten(1, (k, self.k)).copy_(feed.unsqueeze(2))
        self.parent_anc[:, self.filled:end].unflatten(1, (k, self.k)).copy_(anc.unsqueeze(2))
        self.filled = end
        self.calls += 1
        return logits
