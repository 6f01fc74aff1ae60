"""Kills for decoding/stats.py survivors (round 22c): a step is whole unless said cut (record_step's default), so a
run nothing cut measures the same over its whole steps as generate's own tau."""
from draftsmith.decoding.stats import Stats


def test_a_step_is_whole_unless_said_cut():
    st = Stats(accepted_per_position=[0, 0])
    st.record_step(2)
    st.record_step(0)
    assert st.cut == []
    assert st.whole_steps() == (st.acceptance_length, [1, 1], 2) == (2.0, [1, 1], 2)


def test_a_step_past_the_positions_counted_so_far_adds_them_as_zeros_then_counts():
    """accepted_per_position grows to a step's accepted drafts (new positions start at 0), never past them."""
    st = Stats()
    st.record_step(2)
    assert st.accepted_per_position == [1, 1]
    st = Stats(accepted_per_position=[5])
    st.record_step(3)
    assert st.accepted_per_position == [6, 1, 1]
    st.record_step(3)
    assert st.accepted_per_position == [7, 2, 2]
