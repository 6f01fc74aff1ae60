"""Mutation round 36 (part 3): TargetArch.check's hc_mult read (outside the round's changed lines, found by its
run): a null or 0 hc_mult is one residual stream, as the key absent is."""
from types import SimpleNamespace

import pytest

from draftsmith.components.targets import TARGETS


@pytest.mark.parametrize("value", [None, 0, 1])
def test_a_null_or_zero_hc_mult_is_one_stream(value):
    TARGETS["qwen3"]().check(SimpleNamespace(model_type="qwen3", num_hidden_layers=2, hc_mult=value))
