"""Mutation survivors (round 34) of draftsmith.components.targets' mixture-of-experts rules: which layers
decoder_sparse_step makes MoE (and its default, transformers' 1), a step that says no layers refused with the reason
(not a ZeroDivisionError), a top-1 router loads, and a count, n_group or topk_group of zero is refused naming the
key (the group limit's message names the experts' key)."""
from types import SimpleNamespace

import pytest

from draftsmith.components.targets import TARGETS, UnsupportedTarget

MOE = {"num_key_value_heads": 4, "num_hidden_layers": 3, "first_k_dense_replace": 1, "n_routed_experts": 4,
       "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1, "n_shared_experts": 1, "moe_intermediate_size": 32,
       "routed_scaling_factor": 2.5, "norm_topk_prob": True, "hidden_act": "silu"}


def _deepseek(**keys):
    return SimpleNamespace(model_type="deepseek_v3", **{**MOE, **keys})


def _qwen(**keys):
    return SimpleNamespace(model_type="qwen3_moe", **{"num_hidden_layers": 6, "num_experts": 4,
                                                      "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                                      "hidden_act": "silu", **keys})


# catches targets.py moe_layers (i + 1) % step -> (i - 1) % step (step 2 cannot tell them apart: step 3 can)
def test_every_step_th_layer_is_moe():
    arch = TARGETS["qwen3_moe"]()
    assert arch.moe_layers(_qwen(decoder_sparse_step=3)) == [2, 5]
    assert arch.moe_layers(_qwen(decoder_sparse_step=3, mlp_only_layers=[5])) == [2]


# catches targets.py moe_layers getattr(cfg, moe_step, 1) -> 2 / 0 (transformers' default: every layer)
def test_no_step_key_makes_every_layer_moe():
    assert TARGETS["qwen3_moe"]().moe_layers(_qwen()) == [0, 1, 2, 3, 4, 5]


# catches targets.py moe_layers step < 1 -> step < 0 and the or-chain -> and (a ZeroDivisionError or a bool read as 1)
@pytest.mark.parametrize("step", [0, -1, True, "2"])
def test_a_step_that_says_no_layers_is_refused_naming_the_key(step):
    with pytest.raises(UnsupportedTarget, match=f"decoder_sparse_step={step!r} does not say which layers"):
        TARGETS["qwen3_moe"]().moe_layers(_qwen(decoder_sparse_step=step))


# catches targets.py moe_check value < 1 -> value <= 1 / value < 2 (a top-1 router refused)
def test_a_top_1_router_loads():
    TARGETS["qwen3_moe"]().check(_qwen(num_experts_per_tok=1))
    TARGETS["deepseek_v3"]().check(_deepseek(num_experts_per_tok=1))


# catches targets.py moe_check value < 1 -> value < 0 (zero experts chosen, a 0-wide expert)
@pytest.mark.parametrize("key", ["num_experts_per_tok", "moe_intermediate_size"])
def test_a_zero_count_is_refused_naming_the_key(key):
    with pytest.raises(UnsupportedTarget, match=f"{key}=0 in its mixture-of-experts layers.*allowed: a positive int"):
        TARGETS["qwen3_moe"]().check(_qwen(**{key: 0}))


# catches targets.py moe_check groups < 1 -> groups < 0 (n_group 0: a ZeroDivisionError) and keys[0] -> keys[1]
def test_zero_groups_are_refused_naming_the_experts_key():
    with pytest.raises(UnsupportedTarget, match=r"n_group=0 .*allowed: a divisor of n_routed_experts=4 leaving"):
        TARGETS["deepseek_v3"]().check(_deepseek(n_group=0))
    with pytest.raises(UnsupportedTarget, match=r"n_group=3 .*allowed: a divisor of n_routed_experts=4 leaving"):
        TARGETS["deepseek_v3"]().check(_deepseek(n_group=3))


# catches targets.py moe_check not 1 <= topk_group -> not 0 <= topk_group (no group kept: nothing to choose)
def test_zero_kept_groups_are_refused():
    with pytest.raises(UnsupportedTarget, match=r"topk_group=0 .*allowed: 1\.\.n_group=2"):
        TARGETS["deepseek_v3"]().check(_deepseek(topk_group=0))
