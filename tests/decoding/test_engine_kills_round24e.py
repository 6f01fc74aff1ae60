"""Mutation survivors of draftsmith/decoding/engine.py lines 236-326 (_draws, _loop, speculative, baseline), round
24e (scripts/mutate.py), each planted and seen failing. The decode loop runs one step ahead as on CUDA (this
folder's conftest); expectations are worked out by hand from the documented rules (inflight.worth_running_ahead,
runners.KeySpans), never from the engine's own output."""
from draftsmith.decoding import engine, runners
from draftsmith.decoding.static_pool import StaticKVPool


def _decisions(monkeypatch):
    """The real worth_running_ahead, recording (the longest output so far, its answer) at each call."""
    real, seen = engine.worth_running_ahead, []

    def spy(outs, done, max_new_tokens, most_per_step):
        ok = real(outs, done, max_new_tokens, most_per_step)
        seen.append((max(len(o) for o in outs), ok))
        return ok

    monkeypatch.setattr(engine, "worth_running_ahead", spy)
    return seen


def test_target_only_runs_ahead_while_a_row_needs_a_step_past_the_one_in_flight(pairs, monkeypatch):
    """catches engine.py:323 ``_loop(..., most_per_step=1)`` -> 2
    (a target-only step commits one token, so the loop launches the next step while a row's output plus that one
    token is still short of max_new_tokens: with 5 asked for and the prefill's first token, it runs ahead of the
    steps that bring the output to 2, 3 and 4 tokens and not of the last. A bound of 2 stopped a step early, so
    that step ran in lockstep: the same tokens, one host wait more.)"""
    seen = _decisions(monkeypatch)
    out = pairs["eagle1"].generate_baseline([[5, 6, 7, 8, 9]], max_new_tokens=5, stop=[])
    assert len(out[0].token_ids) == 5
    assert seen == [(1, True), (2, True), (3, True), (4, False)]


def test_speculative_runs_ahead_while_a_row_needs_a_step_past_one_that_accepts_everything(pairs, monkeypatch):
    """catches engine.py:269 ``most = plan.steps + 1`` -> ``plan.steps + 2``
    (a step commits at most steps + 1 tokens, the accepted ones and the bonus: the loop launches the next step
    while a row's output plus steps + 1 is short of max_new_tokens. The self draft accepts every drafted token, so
    a chain of 3 steps commits 4 a step: outputs 1, 5, 9, 13 of the 14 asked for, and the loop runs ahead at
    1, 5, 9 (9 + 4 < 14) but not at 13. A bound of steps + 2 stopped at 9 (9 + 5 = 14).)"""
    seen = _decisions(monkeypatch)
    model = pairs["self"]
    out = model.generate([[5, 6, 7, 8, 9]], max_new_tokens=14, stop=[], topk=1, steps=3)
    assert len(out[0].token_ids) == 14 and out[0].stats.accepted_per_position == [3, 3, 3]
    assert seen == [(1, True), (5, True), (9, True), (13, False)]


def test_target_only_spans_count_the_one_token_of_the_step_in_flight(pairs, monkeypatch):
    """catches engine.py:307 ``KeySpans((target.pool,), ..., 1, pending_slots(None), ...)`` -> per_step 0
    (KeySpans sizes a step's key span as the bucket of the longest length the host last read, plus per_step for
    each step launched and not read yet, plus the margin pending_slots(None) = 2; a target-only step commits one
    token. Prompt of 5, 5 new tokens, buckets from 1 slot: step 1 launches with nothing in flight, bucket(5 + 2)
    = 8; each later step launches ahead, one step in flight, after the host read lengths 5, 6, 7: bucket(5 + 1 +
    2) = 8, bucket(6 + 1 + 2) = 16, bucket(7 + 1 + 2) = 16. A per_step of 0 gave 8, 8, 8, 16: enough keys only
    because the margin's spare slot covered the token in flight.)"""
    monkeypatch.setattr(StaticKVPool, "eager_trim", False)
    monkeypatch.setattr(StaticKVPool, "min_span", 1)
    real_next, spans = runners.KeySpans.next, []
    monkeypatch.setattr(runners.KeySpans, "next", lambda self: spans.append(real_next(self)) or spans[-1])
    model = pairs["eagle1"]
    monkeypatch.setattr(model, "_runners_cache", {})
    out = model.generate_baseline([[5, 6, 7, 8, 9]], max_new_tokens=5, stop=[])
    assert len(out[0].token_ids) == 5
    assert spans == [8, 8, 16, 16]
