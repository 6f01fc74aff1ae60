"""Running the draft model over a tree being built: the state the tree functions do not hold.

Every expanded node is written to the draft pool past the committed length, as scratch; the catch-up forward after
verification overwrites that region and only the committed tokens advance the length, so no tree node ever stays
in the draft's cache (invariant 20). Everything here stays on the device, at shapes fixed by the plan."""
from __future__ import annotations

import torch

from draftsmith.components.fused import kernel


class TreeExpander:
    """``expand(frontier_cand [B, k], tokens [B, k]) -> logits [B, k, V]`` for :func:`draft_candidates`.

    Candidates of level 0 are the root's children; the children of the j-th call are appended in frontier order
    (k per frontier node), which is how :func:`topk_children` lays them out, so each candidate's parent state is
    one ``repeat_interleave`` away."""

    def __init__(self, run, feed0: torch.Tensor, k: int, steps: int, active: torch.Tensor, fused: bool = False):
        # run(ids [B, T], hidden [B, T, H], rows, rel_pos, rel_mask, from_target=False) -> (feed, logits [B, T, V])
        # feed0: [B, H] the draft's state after the root; active: [B] rows still decoding (others write nothing);
        # fused: the index arithmetic of a call runs as one compiled kernel (components.fused)
        self.run, self.k, self.fused = run, k, fused
        B, H = feed0.shape
        dev = feed0.device
        P = max(1, k * (steps - 1))                                    # scratch rows: k per expansion
        C = k + (steps - 1) * k * k                                    # candidates, as draft_candidates makes them
        # the state (and scratch ancestry) after each candidate's parent, filled level by level
        self.parent_feed = feed0.new_empty(B, C, H)
        self.parent_feed[:, :k] = feed0[:, None]
        self.parent_anc = torch.zeros(B, C, P, dtype=torch.bool, device=dev)
        self.filled = k
        self.node = torch.arange(k, device=dev)
        self.cols = torch.arange(P, device=dev)
        self.inactive = ~active[:, None]
        self.calls = 0

    def __call__(self, frontier: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        j = self.calls
        hidden, rows, pos, anc = kernel(node_inputs, self.fused)(self.parent_feed, self.parent_anc, frontier,
                                                                self.node, self.cols, self.inactive, j)
        feed, logits = self.run(tokens, hidden, rows, pos, anc, from_target=False)
        k = self.k
        end = self.filled + k * k
        # each new node's state, once per child it will have (repeat_interleave, written as a broadcast copy)
        self.parent_feed[:, self.filled:end].unflatten(1, (k, k)).copy_(feed.unsqueeze(2))
        self.parent_anc[:, self.filled:end].unflatten(1, (k, k)).copy_(anc.unsqueeze(2))
        self.filled = end
        self.calls += 1
        return logits


def node_inputs(parent_feed: torch.Tensor, parent_anc: torch.Tensor, frontier: torch.Tensor, node: torch.Tensor,
                cols: torch.Tensor, inactive: torch.Tensor, j: int):
    # the j-th expansion's draft inputs: frontier [B, k] candidate indices, node = arange(k) ->
    # hidden [B, k, H] (each parent's state), rows [B, k] (-1 in inactive rows), rel_pos [B, k] (= j) and the
    # scratch ancestry [B, k, P]: the parent's plus the node's own row (a broadcast compare, not an indexed write
    # of a host scalar: that is a host-to-device copy, a synchronisation, which a CUDA graph cannot capture)
    B, k = frontier.shape
    batch = torch.arange(B, device=frontier.device)[:, None]
    rows = node + j * k                                                        # [k] scratch offset per node
    anc = parent_anc[batch, frontier] | (rows[:, None] == cols)
    return parent_feed[batch, frontier], rows.expand(B, k).masked_fill(inactive, -1), rows.new_full((B, k), j), anc
