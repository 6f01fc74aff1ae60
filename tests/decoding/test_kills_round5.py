"""Mutation survivors of decoding/stats.py, syncs.py and launches.py (round 5): each test names the mutants it
catches. Pure host-side checks: no model, no GPU."""
import pytest
import torch

from draftsmith.decoding.launches import LaunchCounter
from draftsmith.decoding.stats import Stats
from draftsmith.decoding.syncs import SyncCounter


# --- stats.py ---------------------------------------------------------------------------------------------------
def test_a_fresh_stats_reads_all_zeros_without_dividing_by_zero():
    # catches stats.py:10-14 a counter's default 0 -> 1, and the zero-wall guards :38 / :51 / :57 > 0 -> >= 0
    # (a run that never set its wall time would divide by zero)
    assert Stats().as_dict() == {
        "mode": "baseline", "acceptance_length": 1.0, "new_tokens": 0, "target_forwards": 0, "draft_forwards": 0,
        "steps": 0, "committed": 0, "accepted_per_position": [], "tokens_per_second": 0.0,
        "decode_tokens_per_second": 0.0, "wall_seconds": 0.0,
        "prefill_seconds": 0.0, "forward_seconds": 0.0, "draft_seconds": 0.0,
        "bookkeeping_share": 0.0, "addressing_share": 0.0}
    st = Stats()
    # no step decoded: no decoding time to share (None, shown as '-'), where the share read 100% at max_new_tokens 1
    assert (st.decode_tokens_per_second, st.decode_bookkeeping_share, st.decode_addressing_share) == (0.0, None, None)


def test_no_decoding_time_left_reads_zero_rates_and_shares():
    # catches stats.py:45 rest > 0 and committed > 0 -> or, :45 / :75 rest > 0 -> >= 0 (no time after the
    # prefill: a rate or share of nothing is 0, not a division by zero)
    st = Stats(new_tokens=5, committed=4, steps=2, wall_seconds=2.0, prefill_seconds=2.0, forward_seconds=1.5,
               addressing_seconds=0.5, prefill_forward_seconds=1.0, prefill_addressing_seconds=0.25)
    assert st.decode_tokens_per_second == 0.0
    assert st.decode_bookkeeping_share == 0.0
    assert st.decode_addressing_share == 0.0


def test_rates_and_shares_under_a_second_of_decoding():
    # catches the guards > 0 -> > 1 where the time left is under a second (:45 rest > 0, :67 / :75 rest > 0),
    # and committed > 0 -> > 1 at one committed token
    st = Stats(new_tokens=2, committed=1, steps=1, wall_seconds=0.75, prefill_seconds=0.25, forward_seconds=0.5,
               addressing_seconds=0.2, prefill_forward_seconds=0.125, prefill_addressing_seconds=0.075)
    assert st.decode_tokens_per_second == pytest.approx(2.0)          # 1 committed / 0.5 s
    assert st.decode_bookkeeping_share == pytest.approx(1 - 0.375 / 0.5)
    assert st.decode_addressing_share == pytest.approx(0.125 / 0.5)


def test_as_dict_rounds_times_to_four_digits_and_shares_to_three():
    # catches stats.py as_dict round(..., 4) -> 3 / 5 for wall, prefill and forward seconds and round(..., 3)
    # -> 2 / 4 for the addressing share (values chosen so each precision reads differently)
    st = Stats(mode="tree", new_tokens=14, wall_seconds=0.123456, prefill_seconds=0.0123456,
               forward_seconds=0.08123, addressing_seconds=0.0151)
    d = st.as_dict()
    assert (d["wall_seconds"], d["prefill_seconds"], d["forward_seconds"]) == (0.1235, 0.0123, 0.0812)
    assert d["addressing_share"] == 0.122
    assert d["bookkeeping_share"] == 0.342


def test_record_step_grows_the_positions_as_acceptance_grows():
    # catches stats.py:83 accepted - len -> accepted + len (a longer step after a shorter one would pad past
    # its own positions), and the pad value 0 -> 1
    st = Stats()
    for acc in (1, 3, 0, 2):
        st.record_step(acc)
    assert st.accepted_per_position == [3, 2, 1]
    assert (st.steps, st.committed) == (4, 10)


# --- syncs.py ---------------------------------------------------------------------------------------------------
def test_indexing_with_keyword_arguments_passes_through():
    # catches syncs.py's indices read as args[1] where they came as a keyword (IndexError); integer indices are
    # no host read, a boolean mask given as indices= is one (the counter once missed it)
    t = torch.zeros(4)
    with SyncCounter() as c:
        t.index_put_(indices=(torch.tensor([1, 3]),), values=torch.tensor(2.0))
        out = torch.index_put(t, indices=(torch.tensor([0]),), values=torch.tensor(5.0))
    assert t.tolist() == [0.0, 2.0, 0.0, 2.0] and out.tolist() == [5.0, 2.0, 0.0, 2.0] and c.count == 0
    with SyncCounter() as c:
        t.index_put_(indices=(torch.tensor([True, False, False, False]),), values=torch.tensor(7.0))
    assert t.tolist() == [7.0, 2.0, 0.0, 2.0] and c.by_name == {"index_put_[bool]": 1}


def test_keyword_arguments_reach_the_function_under_the_sync_counter():
    # catches syncs.py:41 kwargs or {} -> kwargs and {} (every keyword argument dropped)
    t = torch.arange(6.0).reshape(2, 3)
    with SyncCounter() as c:
        s = t.sum(dim=0)
        a = torch.add(t, t, alpha=2)
    assert s.tolist() == [3.0, 5.0, 7.0] and a[1].tolist() == [9.0, 12.0, 15.0] and c.count == 0


# --- launches.py ------------------------------------------------------------------------------------------------
def test_keyword_arguments_reach_the_operator_under_the_launch_counter():
    # catches launches.py:50 kwargs or {} -> kwargs and {} (alpha is keyword-only in aten.add: it would be dropped)
    x = torch.ones(3)
    with LaunchCounter() as c:
        y = torch.add(x, x, alpha=3)
    assert y.tolist() == [4.0, 4.0, 4.0] and c.by_op == {"add": 1}


def test_an_operator_that_returns_nothing_still_launches():
    # catches launches.py:32 rets and all(...) -> rets or all(...) (an in-place foreach op returns nothing: with
    # `or` the empty returns read as "every output is a view" and its kernel went uncounted)
    from draftsmith.decoding.launches import launches

    assert launches(torch.ops.aten._foreach_add_.Scalar)
    xs = [torch.ones(2), torch.ones(3)]
    with LaunchCounter() as c:
        torch._foreach_add_(xs, 1.0)
    assert c.by_op == {"_foreach_add_": 1} and xs[1].tolist() == [2.0, 2.0, 2.0]


def test_operators_after_a_fused_function_count_again():
    # catches launches.py:62 / :66 the quiet depth += 1 -> += 2 / -= 1, -= 1 -> -= 2 / += 1 (unbalanced: the
    # counter stays quiet after the first fused function), and :70 wanted -> False inside fused()
    from draftsmith.components import fused

    x, w = torch.arange(6.0), torch.ones(6)
    with LaunchCounter() as c, c.fused():
        assert fused.wanted("off", "cpu")                      # every pool built meanwhile asks for fused kernels
        fused.kernel(fused.rms_norm, True)(x, w, 1e-6)
        y = x * 2
        fused.kernel(fused.rms_norm, True)(y, w, 1e-6)
        y.add_(1)
    assert c.by_op == {"fused.rms_norm": 2, "mul": 1, "add_": 1} and c.count == 4
    assert not fused.wanted("off", "cpu")                      # restored on the way out


def test_repeat_interleave_with_keyword_repeats_passes_through():
    # catches syncs.py:49 len(args) > 1 -> >= 1 / > 0 (args[1] read where repeats came as a keyword: IndexError).
    # Integer repeats read nothing on the host, so nothing counts; a tensor given as repeats= is a host read
    t = torch.tensor([1, 2])
    with SyncCounter() as c:
        a = t.repeat_interleave(repeats=2)
        b = torch.repeat_interleave(t, repeats=3)
    assert a.tolist() == [1, 1, 2, 2] and b.tolist() == [1, 1, 1, 2, 2, 2] and c.count == 0
    with SyncCounter() as c:
        t.repeat_interleave(repeats=t)
        torch.repeat_interleave(t, repeats=t)
    assert c.by_name == {"repeat_interleave(tensor)": 2}
