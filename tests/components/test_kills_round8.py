"""Mutation round 8: components/target_quant.py (a target's own quantization_config read into FP8 settings, and what
it refuses), components/split_rule.py, assembler/splits.py, decoding/graphs.py (what runs on CPU) and
decoding/modes.py. split_rule.py and modes.py left no survivor, splits.py only an equivalent one. The tests pin
compressed-tensors' defaults (num_bits 8, inputs not dynamic), the bounds of a block_structure, config groups and
targets that must not be empty, block input groups following the block's columns; and an enabled Replay's
bookkeeping with its CUDA capture stood in for (each shape captured once, a failed capture eager, a given pool kept,
two warm-ups by default), and that an EmulatedReplay is always enabled."""
from types import SimpleNamespace

import pytest
import torch

from draftsmith import limits
from draftsmith.components.target_quant import target_settings
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.decoding.graphs import EmulatedReplay, Replay

# ---- components/target_quant.py ---------------------------------------------------------------------------------


def ct_args(strategy, dynamic, **extra):
    return {"dynamic": dynamic, "group_size": None, "num_bits": 8, "strategy": strategy, "symmetric": True,
            "type": "float", **extra}


def ct_config(weights, inputs, **group):
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": inputs,
                                          **group}}}


def block_config(block, inputs=None):
    return ct_config(ct_args("block", False, block_structure=block), inputs)


def refusal(config) -> str:
    with pytest.raises(UnsupportedTarget) as err:
        target_settings(config)
    return str(err.value)


@pytest.mark.parametrize("groups", [{}, [{"targets": ["Linear"]}]], ids=["empty", "a list"])
def test_config_groups_must_be_a_mapping_of_at_least_one_group(groups):
    config = ct_config(ct_args("channel", False), None) | {"config_groups": groups}
    assert "config_groups=" in refusal(config) and "a mapping of one or more groups" in refusal(config)


@pytest.mark.parametrize("targets", [[], "Linear"], ids=["empty", "a string"])
def test_a_group_without_a_list_of_targets_is_refused(targets):
    text = refusal(ct_config(ct_args("channel", False), None, targets=targets))
    assert "config_groups.group_0.targets=" in text and "allowed: a list of module names" in text


def test_num_bits_left_out_is_compressed_tensors_default_of_8():
    weights = {k: v for k, v in ct_args("channel", False).items() if k != "num_bits"}
    inputs = {k: v for k, v in ct_args("token", True).items() if k != "num_bits"}
    settings = target_settings(ct_config(weights, inputs))
    assert (settings["scheme"], settings["activation"]) == ("channel", "dynamic")


@pytest.mark.parametrize("block", [[1, 128], [128, 1], [limits.WIDTH, 128], [128, limits.WIDTH]])
def test_a_block_structure_side_from_1_to_the_width_limit_is_read(block):
    settings = target_settings(block_config(block))
    assert (settings["scheme"], settings["block"], settings["activation"]) == ("block", tuple(block), "none")


@pytest.mark.parametrize("block", [[0, 128], [128, 0], [-128, 128], [limits.WIDTH + 1, 128], [128.0, 128],
                                   [True, 128], [128, "128"]])
def test_a_block_structure_side_outside_1_to_the_width_limit_or_not_an_int_is_refused(block):
    text = refusal(block_config(block))
    assert "config_groups.group_0.weights.block_structure=" in text, text
    assert f"[rows, columns] per weight scale, each 1 to {limits.WIDTH}" in text


def test_block_inputs_without_dynamic_are_static_as_compressed_tensors_defaults_them_and_refused():
    inputs = {k: v for k, v in ct_args("group", True, group_size=128).items() if k != "dynamic"}
    text = refusal(block_config([128, 128], inputs))
    assert "'dynamic': False" in text and "allowed: null or {strategy: group, group_size: 128" in text, text


def test_block_inputs_group_by_the_block_columns_not_its_rows():
    """block_structure [rows, columns]: the inputs' groups are the columns (block[1]), in what is read and in what
    a refusal allows."""
    settings = target_settings(block_config([128, 64], ct_args("group", True, group_size=64)))
    assert (settings["block"], settings["activation"]) == ((128, 64), "dynamic")
    text = refusal(block_config([128, 64], ct_args("group", True, group_size=32)))
    assert "input_activations.group_size=32 is not supported" in text and "allowed: 64 (block_structure[1])" in text
    text = refusal(block_config([128, 64], ct_args("tensor", False)))
    assert "allowed: null or {strategy: group, group_size: 64, dynamic: true}" in text, text


# ---- decoding/graphs.py (on CPU) ---------------------------------------------------------------------------------


class StubCapture(Replay):
    """An enabled Replay whose CUDA capture is stood in for on CPU: it warms up as Replay's capture does (its
    default runs), then either fails (None: the shape runs eagerly) or returns a fake graph whose replay runs the
    function on the static inputs into static outputs, as a CUDA graph does."""

    def __init__(self, fn, fail=()):
        super().__init__(fn, True, pool="pool")
        self.fail, self.captured = fail, []

    def _capture_graph(self, args, restore):
        self.captured.append(tuple(args[0].shape))
        inputs = [a.clone() for a in args]
        self._warm_up(inputs, restore)
        if tuple(args[0].shape) in self.fail:
            return None
        outputs = tuple(torch.empty_like(o) for o in self.fn(*inputs))

        def replay():
            for buf, o in zip(outputs, self.fn(*inputs)):
                buf.copy_(o)
        return SimpleNamespace(graph=SimpleNamespace(replay=replay), inputs=inputs, outputs=outputs)


def test_an_enabled_replay_captures_each_shape_once_and_runs_a_failed_capture_eagerly():
    calls = []
    replay = StubCapture(lambda x: calls.append(x) or (x * 2,), fail=[(3,)])
    assert replay.pool == "pool"   # a pool given is kept, never a new CUDA one
    (first,) = replay(torch.ones(2))
    assert len(calls) == 2 + 1 + 1   # Replay's two warm-ups by default, the fake capture's run and its replay
    (second,) = replay(torch.full((2,), 3.0))
    assert second is first and torch.equal(second, torch.full((2,), 6.0)) and replay.captured == [(2,)]
    x = torch.arange(3.0)
    for _ in range(2):   # capture failed: the function itself on the caller's tensor, never captured again
        (eager,) = replay(x)
        assert torch.equal(eager, x * 2) and calls[-1] is x
    assert replay.captured == [(2,), (3,)] and replay.graphs[(((3,), torch.float32),)] is None


def test_an_emulated_replay_is_always_enabled_as_the_capturing_replay_it_stands_in_for():
    assert EmulatedReplay(lambda x: (x,)).enabled is True
    assert EmulatedReplay(lambda x: (x,), enabled=False).enabled is True
