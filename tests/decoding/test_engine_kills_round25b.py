"""Mutation survivors of draftsmith/decoding/engine.py lines 1-235, round 25b (scripts/mutate.py), each planted and
seen failing. pending_slots is held to what the forwards of a run actually attend, never to its own formula."""
import pytest

from draftsmith.decoding import engine, runners

PROMPTS = [[5, 6, 7, 8], [1, 2], [9, 3, 3, 3, 3, 1, 4, 4, 2]]


@pytest.fixture
def pending_seen(monkeypatch):
    """Every forward into a pool that holds tokens (not a prefill): how many pending slots past a row's committed
    length it writes and attends (runners.fixed_kv's rel_mask [B, T, P]: P)."""
    real, seen = runners.fixed_kv, []

    def recording(pool, rows, rel_pos, rel_mask, fresh=False):
        if not fresh:
            seen.append(rel_mask.shape[-1])
        return real(pool, rows, rel_pos, rel_mask, fresh)

    monkeypatch.setattr(runners, "fixed_kv", recording)
    return seen


@pytest.mark.parametrize("shape", [
    {"topk": 2, "steps": 3, "draft_tokens": 6},   # the tree's 6 nodes: more than scratch 2 * 2 or catch-up 3 + 1
    {"topk": 4, "steps": 3, "draft_tokens": 6},   # the draft's scratch, 4 candidates on each of 2 expanded levels: 8
    {"topk": 2, "steps": 2, "draft_tokens": 2},   # the catch-up of a step that accepts a whole path: 2 + 1 tokens
    {"topk": 1, "steps": 4},                      # a chain: its 5 nodes, and a catch-up of 5 tokens; scratch 3
], ids=["tree", "scratch", "catch-up", "chain"])
def test_pending_slots_are_the_most_one_forward_attends_past_a_row_plus_one(pairs, pending_seen, shape):
    """catches engine.py:225 ``plan.topk * (plan.steps - 1)`` -> ``(plan.steps - 2)`` / ``(plan.steps - 0)``,
    ``plan.steps + 1`` -> ``plan.steps - 1`` / ``+ 2`` / ``+ 0``
    (pending_slots' docstring: the most slots past a row's committed length that one forward of a step writes and
    attends, the tree's verification, the draft's scratch or the catch-up, plus one. Each shape here is one where
    a different one of the three is the largest; the forwards of a run, recorded where they reach the pool, must
    reach exactly that many slots, so a smaller bound under-sizes the pools and key spans and a larger one
    oversizes every pool of the shape)"""
    model = pairs["eagle3"]
    plan = model.plan(**shape)
    assert (plan.topk, plan.steps) == (shape["topk"], shape["steps"])
    out = model.generate(PROMPTS, max_new_tokens=12, stop=[], **shape)
    assert [len(o.token_ids) for o in out] == [12] * 3
    assert max(pending_seen) + 1 == engine.pending_slots(plan), sorted(set(pending_seen))

