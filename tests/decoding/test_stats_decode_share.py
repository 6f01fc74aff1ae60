"""The share of decoding time outside model forwards: the prefill (its wall time and its forwards) left out, so a
long prompt does not dilute it."""
import pytest

from draftsmith.decoding.stats import Stats


def test_setting_the_prefills_time_records_its_forwards():
    st = Stats()
    st.forward_seconds, st.addressing_seconds = 0.4, 0.05   # the prefill's forwards
    st.end_prefill(0.5)                                      # engine.prefill, once the first token is out
    st.forward_seconds += 1.0
    st.addressing_seconds += 0.1
    st.wall_seconds, st.steps = 2.0, 3
    assert (st.prefill_forward_seconds, st.prefill_addressing_seconds) == (0.4, 0.05)
    assert st.decode_bookkeeping_share == pytest.approx(1 - 1.0 / 1.5)
    assert st.decode_addressing_share == pytest.approx(0.1 / 1.5)
    assert st.bookkeeping_share == pytest.approx(1 - 1.4 / 2.0)   # the whole run's, as before
    built = Stats(prefill_seconds=0.5, forward_seconds=1.4, wall_seconds=2.0)   # made whole: no prefill recorded
    assert built.prefill_forward_seconds == 0.0
    assert Stats(wall_seconds=1.0, prefill_seconds=1.0, steps=1).decode_bookkeeping_share == 0.0


def test_a_runs_decode_share_leaves_the_prefill_out():
    import draftsmith

    model = draftsmith.assemble("demo")
    for out in (model.generate([5, 6, 7] * 20, max_new_tokens=8, stop=[]),
                model.generate_baseline([5, 6, 7] * 20, max_new_tokens=8, stop=[])):
        st = out.stats
        assert 0 < st.prefill_forward_seconds < st.forward_seconds <= st.wall_seconds
        assert 0 < st.prefill_addressing_seconds <= st.addressing_seconds
        assert st.prefill_forward_seconds <= st.prefill_seconds
        assert 0 <= st.decode_bookkeeping_share < 1 and 0 <= st.decode_addressing_share < 1


def test_a_run_that_decoded_no_step_has_no_decode_share():
    """max_new_tokens 1: the prefill's token alone, no step; a microsecond of wall time past the prefill read as
    100% outside the forwards (bench's column said 100.0%)."""
    import draftsmith

    model = draftsmith.assemble("demo")
    for run in (model.generate, model.generate_baseline):
        st = run([1, 2, 3], max_new_tokens=1).stats
        assert st.steps == 0 and st.decode_bookkeeping_share is None and st.decode_addressing_share is None
        st = run([1, 2, 3], max_new_tokens=3, stop=[]).stats
        assert st.steps > 0 and 0 <= st.decode_bookkeeping_share <= 1 and 0 <= st.decode_addressing_share <= 1
