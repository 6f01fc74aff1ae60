"""Round 18, components/target_quant.py. The mutation run left 4 survivors, all equivalent (the default block of a
per-tensor quant_method fp8 target, never read for scheme tensor). Reading the module by hand, the helper found
malformed config values that escaped as TypeError / pydantic ValidationError (CLI: internal error, exit 70): a
weight_block_size that is no [rows, columns], an unhashable quant_method or input strategy. Each is refused as an
UnsupportedTarget naming the key."""
import pytest

from draftsmith.components.quant_models import target_params
from draftsmith.components.targets import UnsupportedTarget


def ct_args(strategy, dynamic):
    return {"type": "float", "num_bits": 8, "symmetric": True, "strategy": strategy, "dynamic": dynamic}


def ct_config(inputs):
    return {"quant_method": "compressed-tensors", "format": "float-quantized",
            "config_groups": {"g": {"targets": ["Linear"], "weights": ct_args("channel", False),
                                    "input_activations": inputs}}}


@pytest.mark.parametrize("block", [128, True, [128], [128, 0], "ab", [128, 128, 128]])
def test_a_malformed_weight_block_size_is_refused_by_key(block):
    with pytest.raises(UnsupportedTarget, match="weight_block_size="):
        target_params({"quant_method": "fp8", "weight_block_size": block})


@pytest.mark.parametrize("method", [["fp8"], {"fp8": 1}])
def test_an_unhashable_quant_method_is_refused_by_key(method):
    with pytest.raises(UnsupportedTarget, match="quant_method="):
        target_params({"quant_method": method})


@pytest.mark.parametrize("inputs", [ct_args(["token"], True), ct_args("token", [True])])
def test_unhashable_input_activation_settings_are_refused_by_key(inputs):
    with pytest.raises(UnsupportedTarget, match="input_activations"):
        target_params(ct_config(inputs))
