"""A speculative step in target-only decode steps (stats.step_cost, the line under `draftsmith generate`'s table):
the draft's share of the forward time recorded apart, the prefills left out, the parts summing to the whole."""
from dataclasses import astuple

import pytest

from draftsmith.decoding.stats import Stats, step_cost

# target-only: 10 decode steps in 1.0 s after a 0.2 s prefill = 0.1 s a step, the unit
BASE = Stats(target_forwards=10, wall_seconds=1.2, prefill_seconds=0.2, forward_seconds=1.1)


def spec_run(**kw) -> Stats:
    # 4 verification steps in 0.8 s after its prefill (0.2 s a step = 2 units); of the 0.6 s of forwards after the
    # prefill, the draft's 0.2 s (0.25 - 0.05 of its prefill)
    return Stats(**{**dict(target_forwards=4, wall_seconds=1.0, prefill_seconds=0.2, forward_seconds=0.7,
                           prefill_forward_seconds=0.1, draft_seconds=0.25, prefill_draft_seconds=0.05), **kw})


def test_a_step_is_split_into_verification_draft_and_the_rest():
    cost = step_cost(spec_run(), BASE)
    assert astuple(cost) == pytest.approx((2.0, 1.0, 0.5, 0.5))   # step, verify, draft, rest
    assert cost.verify + cost.draft + cost.rest == pytest.approx(cost.step)


def test_the_prefills_are_left_out():
    # a longer draft prefill moves nothing after it; a longer target-only prefill leaves its steps as they were
    later = spec_run(draft_seconds=0.35, prefill_draft_seconds=0.15, forward_seconds=0.8, prefill_forward_seconds=0.2)
    assert astuple(step_cost(later, BASE)) == pytest.approx((2.0, 1.0, 0.5, 0.5))
    slow_prefill = Stats(target_forwards=10, wall_seconds=1.7, prefill_seconds=0.7)
    assert step_cost(spec_run(), slow_prefill).step == pytest.approx(2.0)


def test_without_the_forwards_timed_only_the_whole_step_is_given():
    # under whole-step CUDA graphs the runners' timers see launches, not work: no split
    assert astuple(step_cost(spec_run(), BASE, timed=False)) == pytest.approx((2.0, None, None, None))


@pytest.mark.parametrize("run, base", [
    (spec_run(target_forwards=0), BASE),                                   # no verification step (1 token asked)
    (spec_run(), Stats(target_forwards=0, wall_seconds=1.0)),             # target-only made none
    (spec_run(), Stats(target_forwards=3, wall_seconds=0.5, prefill_seconds=0.5)),   # nor any time after its prefill
])
def test_no_steps_to_compare_gives_none(run, base):
    assert step_cost(run, base) is None


def test_the_prefill_records_the_drafts_time_so_far():
    st = Stats(forward_seconds=0.4, draft_seconds=0.1)
    st.end_prefill(0.5)
    assert (st.prefill_forward_seconds, st.prefill_draft_seconds) == (0.4, 0.1)
    assert Stats().as_dict()["draft_seconds"] == 0.0


def test_a_runs_draft_time_is_the_drafts_forwards_only():
    import draftsmith

    model = draftsmith.assemble("demo")
    spec = model.generate([5, 6, 7] * 20, max_new_tokens=12, stop=[]).stats
    base = model.generate_baseline([5, 6, 7] * 20, max_new_tokens=12, stop=[]).stats
    assert 0 < spec.prefill_draft_seconds < spec.draft_seconds < spec.forward_seconds
    assert spec.prefill_draft_seconds < spec.prefill_forward_seconds     # the prefill ran the target too
    assert base.draft_seconds == base.prefill_draft_seconds == 0.0       # target-only: the target's forwards alone
    cost = step_cost(spec, base)
    assert cost.verify > 0 and cost.draft > 0 and cost.verify + cost.draft + cost.rest == pytest.approx(cost.step)
