"""Spec v1 / v2 selection: tree drafting with KV compaction (v2) or chain drafting with no moves (v1)."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from draftsmith.specs.resolve import tree_blockers

log = logging.getLogger("draftsmith")


@dataclass(frozen=True)
class Plan:
    mode: str        # "v1" | "v2"
    topk: int
    steps: int
    draft_tokens: int
    reason: str


V2 = "v2 (tree drafting with compaction)"
RECURRENT = "the target has recurrent (mamba / linear-attention) layers, whose state is not rolled back"


def choose_mode(mode: str, topk: int, steps: int, draft_tokens: int, page_size: int, recurrent: bool) -> Plan:
    """``auto`` picks v2 only when topk > 1, page_size == 1 and the target has no recurrent layers; otherwise v1
    (a chain of ``steps`` tokens), logging one line that says why. Explicit v2 in an unsupported combination is
    refused before this runs (the spec checks, assemble for a recurrent target, check_overrides for a call); the
    ValueError here is for a caller that skipped them."""
    why = tree_blockers(topk, page_size) + [RECURRENT] * recurrent
    if mode == "v2" and why:
        raise ValueError(f"decoding mode v2 is unsupported: {'; '.join(why)}")
    if mode == "v1" or why:
        reason = "mode v1 requested" if mode == "v1" else "auto chose v1 (chain): " + "; ".join(why)
        if mode == "auto" and topk > 1:
            log.info("draftsmith: %s", reason)
        return Plan("v1", 1, steps, steps + 1, reason)
    return Plan("v2", topk, steps, draft_tokens, "tree drafting with compaction (topk > 1, page_size 1)")
