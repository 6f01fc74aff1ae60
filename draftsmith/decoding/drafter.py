"""Running the draft model over a tree being built: the state the tree functions do not hold.

Every expanded node is written to the draft pool past the committed length, as scratch; the catch-up forward after
verification overwrites that region and only the committed tokens advance the length, so no tree node ever stays
in the draft's cache (invariant 20). Everything here stays on the device, at shapes fixed by the plan."""
from __future__ import annotations

import functools

import torch

from draftsmith.components.fused import kernel


class TreeExpander:
    """``expand(frontier_cand [B, k], tokens [B, k]) -> logits [B, k, V]`` for :func:`draft_candidates`.

    Candidates of level 0 are the root's children; the children of the j-th call are appended in frontier order
    (k per frontier node), which is how :func:`topk_children` lays them out, so a candidate's parent is node
    ``(index - start) // k`` of the previous call, ``start`` being that call's first child: the expander keeps
    only the previous call's states and ancestry, and gathers (no per-call copies into a buffer of all
    candidates)."""

    def __init__(self, run, feed0: torch.Tensor, k: int, steps: int, active: torch.Tensor, fused: bool = False):
        # run(ids [B, T], hidden [B, T, H], rows, rel_pos, rel_mask, from_target=False) -> (feed, logits [B, T, V])
        # feed0: [B, H] the draft's state after the root; active: [B] rows still decoding (others write nothing);
        # fused: the index arithmetic of a call runs as one compiled kernel (components.fused)
        self.run, self.k, self.fused, self.active = run, k, fused, active
        # the previous call's nodes: states [B, n, H] and scratch ancestry [B, n, P]; before the first call the
        # only parent is the root (no scratch row). The constants are made once per shape: no launch per step
        self.anc, self.node, self.cols = _constants(feed0.shape[0], k, max(1, k * (steps - 1)), feed0.device)
        self.feed, self.start, self.calls = feed0[:, None], 0, 0

    def __call__(self, frontier: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        j = self.calls
        hidden, rows, pos, anc = kernel(node_inputs, self.fused)(self.feed, self.anc, frontier, self.start,
                                                                self.node, self.cols, self.active, j)
        self.feed, logits = self.run(tokens, hidden, rows, pos, anc, from_target=False)
        self.anc = anc
        self.start = self.k + j * self.k * self.k        # this call's first child, as draft_candidates counts
        self.calls += 1
        return logits


@functools.cache   # never evicts: a captured CUDA graph reads these by address (as engine._causal_parts)
def _constants(B: int, k: int, P: int, device: torch.device):
    # (the root's scratch ancestry [B, 1, P], all False; node = arange(k); cols = arange(P)): read, never written
    return (torch.zeros(B, 1, P, dtype=torch.bool, device=device), torch.arange(k, device=device),
            torch.arange(P, device=device))


def node_inputs(feed: torch.Tensor, anc: torch.Tensor, frontier: torch.Tensor, start: int, node: torch.Tensor,
                cols: torch.Tensor, active: torch.Tensor, j: int):
    # the j-th expansion's draft inputs: feed [B, n, H] / anc [B, n, P] the previous call's nodes, frontier [B, k]
    # candidate indices (a parent's children start at start + k * parent), node = arange(k), active [B] rows
    # still decoding -> hidden [B, k, H] (each parent's state), rows [B, k] (-1 in inactive rows), rel_pos [B, k]
    # (= j) and the scratch ancestry
    # [B, k, P]: the parent's plus the node's own row (a broadcast compare, not an indexed write of a host scalar:
    # that is a host-to-device copy, a synchronisation, which a CUDA graph cannot capture)
    B, k = frontier.shape
    batch = torch.arange(B, device=frontier.device)[:, None]
    parent = (frontier - start) // k                                           # [B, k] node of the previous call
    rows = node + j * k                                                        # [k] scratch offset per node
    own = anc[batch, parent] | (rows[:, None] == cols)
    return feed[batch, parent], rows.expand(B, k).masked_fill(~active[:, None], -1), rows.new_full((B, k), j), own
