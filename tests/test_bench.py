"""The side-by-side benchmark's timing: a warm-up per method, then the methods take turns (a drifting machine
slows all of them alike)."""
import pytest
from transformers.utils import logging as hf_logging

from draftsmith.bench import _median_time, _round_robin
from draftsmith.hub import quiet_transformers


def test_round_robin_warms_up_each_method_then_takes_turns():
    order = []
    methods = {"a": lambda: order.append("a") or len(order), "b": lambda: order.append("b") or len(order)}
    rows = _round_robin(methods, 3)
    assert order == ["a", "b"] * 4
    assert rows["a"][1] == 7 and rows["b"][1] == 8 and all(sec >= 0 for sec, _ in rows.values())
    assert _median_time(lambda: "x", 2)[1] == "x"


def test_transformers_warnings_are_silenced_only_while_the_peers_run():
    before = hf_logging.get_verbosity()
    with quiet_transformers():
        assert hf_logging.get_verbosity() == hf_logging.ERROR
    assert hf_logging.get_verbosity() == before

    with pytest.raises(RuntimeError, match="peer failed"), quiet_transformers():
        raise RuntimeError("peer failed")
    assert hf_logging.get_verbosity() == before
