"""Mutation round 26c on draftsmith.decoding.modes.choose_mode (now reading specs.resolve.tree_blockers): auto's
fallback to a chain is logged for every tree asked for, topk 2 the smallest; a chain asked for is not."""

import logging

from draftsmith.decoding.modes import choose_mode


def test_auto_falling_back_from_a_tree_of_topk_2_is_logged(caplog):
    """topk 2 under page_size 2 is a tree asked for and refused: v1, and the info line says why. Kills
    `mode == 'auto' and topk > 1` -> `topk > 2` (topk 2's fallback went unsaid)."""
    with caplog.at_level(logging.INFO, logger="draftsmith"):
        plan = choose_mode("auto", 2, 5, 8, 2, False)
    assert (plan.mode, plan.topk, plan.draft_tokens) == ("v1", 1, 6)
    assert [r.getMessage() for r in caplog.records] == ["draftsmith: auto chose v1 (chain): page_size is 2"]


def test_a_chain_asked_for_is_not_logged(caplog):
    """topk 1 is the chain the caller asked for: the same plan, no info line."""
    with caplog.at_level(logging.INFO, logger="draftsmith"):
        plan = choose_mode("auto", 1, 5, 8, 2, False)
    assert plan.reason == "auto chose v1 (chain): topk is 1; page_size is 2" and caplog.records == []
