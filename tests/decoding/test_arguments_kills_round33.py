"""Mutation round 33 (arguments.pairing_problems): a rebound draft's taps are layer inputs 0..L (L the target's
layer count: its last state), both ends allowed; a tap past either end is said."""
import copy

import pytest

import draftsmith
from draftsmith.decoding.arguments import pairing_problems


@pytest.fixture(scope="module")
def model():
    return copy.deepcopy(draftsmith.assemble("demo"))


def test_taps_at_both_ends_are_a_draft_of_this_target(model):
    layers = len(model.target.model.layers)
    model.draft.fc.taps = (0, 1, layers)
    assert pairing_problems(model) == []


@pytest.mark.parametrize("tap", [-1, "past"])
def test_a_tap_past_either_end_is_said(model, tap):
    layers = len(model.target.model.layers)
    tap = layers + 1 if tap == "past" else tap
    model.draft.fc.taps = (0, tap)
    got = pairing_problems(model)
    assert len(got) == 1 and f"taps [{tap}] (the target's: 0..{layers}" in got[0], got
