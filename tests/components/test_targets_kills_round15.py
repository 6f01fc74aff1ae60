"""Mutation survivors of draftsmith.components.targets: no built-in target type is recurrent (so none rules out
spec v2), each type's attention recipe (q/k/v bias only where the type fixes it), the hc_mult bound (one residual
stream loads, two are refused with the reason) and the MoE layers' bound (a config dense up to its last layer loads
without a router check, no dense count at all is refused naming the key, a router option not computed too)."""
from types import SimpleNamespace

import pytest

from draftsmith.components.targets import TARGETS, TargetArch, UnsupportedTarget


# catches targets.py:33 recurrent: bool = False -> True
def test_no_builtin_target_type_is_recurrent():
    assert TargetArch().recurrent is False
    assert {name: make().recurrent for name, make in TARGETS.items()} == dict.fromkeys(TARGETS, False)


# catches targets.py:49 self.qkv_bias is None -> is not None (a type that fixes no bias leaves it to the config)
# catches targets.py:76 arch(qk_norm=True, ...) -> qk_norm=False (qwen3's per-head q / k norms)
def test_each_target_type_s_attention_recipe():
    recipes = {name: make().attention_recipe() for name, make in TARGETS.items()}
    none = ("gqa", {"qk_norm": False, "qkv_bias": False, "o_bias": False})   # Mistral's and Ministral's layers
    gemma = {"qk_norm": False, "scale_key": "query_pre_attn_scalar"}   # the scores scaled by their own key
    gemma3 = {**gemma, "qk_norm": True, "layer_type_rope": True}
    assert recipes == {"llama": ("gqa", {"qk_norm": False}), "mistral": none, "ministral": none, "mixtral": none,
                       "qwen2": ("gqa", {"qk_norm": False, "qkv_bias": True, "o_bias": False}),
                       "qwen3": ("gqa", {"qk_norm": True}), "qwen3_moe": ("gqa", {"qk_norm": True}),
                       "qwen2_vl": ("gqa", {"qk_norm": False, "qkv_bias": True, "o_bias": False}),
                       "qwen2_5_vl": ("gqa", {"qk_norm": False, "qkv_bias": True, "o_bias": False}),
                       "qwen3_vl": ("gqa", {"qk_norm": True}),
                       "deepseek_v3": ("mla", {"latent_norm_eps": 1e-6}),
                       "kimi_k2": ("mla", {"latent_norm_eps": 1e-6}), "kimi_k25": ("mla", {"latent_norm_eps": 1e-6}),
                       "glm4_moe_lite": ("mla", {"latent_norm_eps": 1e-6}),
                       "gpt_oss": ("gqa", {"qk_norm": False, "sinks": True}),
                       "phi3": ("gqa", {**none[1], "partial_rotary": True}),   # its first part of each head rotates
                       "gemma3_text": ("gqa", gemma3), "gemma3": ("gqa", gemma3),
                       "gemma2": ("gqa", {**gemma, "softcap_key": "attn_logit_softcapping"}),
                       # q/k/v biases by attention_bias, per-head q/k norms by use_qk_norm, part of each head rotated
                       "glm4_moe": ("gqa", {"qk_norm": "config", "o_bias": False, "partial_rotary": True}),
                       "gemma": ("gqa", {"qk_norm": False}),   # biases by attention_bias, head_dim ** -0.5
                       # the layers whose no_rope_layers entry is 0 unrotated
                       "smollm3": ("gqa", {"qk_norm": False, "rope_layers_key": "no_rope_layers"})}
    assert TargetArch(qkv_bias=False).attention_recipe() == ("gqa", {"qk_norm": False, "qkv_bias": False})


# catches targets.py:54 mult > 1 -> mult > 2 (two residual streams loaded as one)
def test_two_residual_streams_are_refused_with_the_reason():
    with pytest.raises(UnsupportedTarget) as err:
        TARGETS["llama"]().check(SimpleNamespace(model_type="llama", hc_mult=2, num_hidden_layers=2))
    assert str(err.value) == (
        "config.json: llama target: hc_mult=2 asks for hyper-connections (2 residual streams, handed to the draft 2 "
        "x hidden_size wide), which draftsmith's target model does not compute: its layers keep one stream, so the "
        "draft would read the wrong width at its first step; allowed: 1, or the key absent (one residual stream). Fix: "
        "use a target whose config.json has an allowed value (editing this one would load its weights under another "
        "computation, whose logits are not the checkpoint's)")


# pins targets.py:53 getattr(cfg, 'hc_mult', 1) -> 2 (a config without the key; also killed by the zoo tests)
def test_a_config_without_hc_mult_loads():
    TARGETS["qwen3"]().check(SimpleNamespace(model_type="qwen3", num_hidden_layers=2))


def _deepseek(**keys):
    return SimpleNamespace(model_type="deepseek_v3", num_hidden_layers=3, **keys)


# pins targets.py moe_layers i >= first (dense through the last layer is all-dense, no router key read; also
# killed by tests/assembler/test_targets_zoo.py)
@pytest.mark.parametrize("dense", [3, 4])
def test_a_config_dense_through_its_last_layer_loads(dense):
    TARGETS["deepseek_v3"]().check(_deepseek(first_k_dense_replace=dense))


# pins targets.py moe_layers: a config without the dense count is refused naming the key, not a TypeError; one with
# MoE layers loads them as mixture-of-experts (tests/assembler/test_moe_targets.py), a router option not computed
# is refused with the reason
def test_a_config_without_a_dense_count_is_refused():
    with pytest.raises(UnsupportedTarget) as err:
        TARGETS["deepseek_v3"]().check(_deepseek())
    assert str(err.value) == ("config.json: deepseek_v3 target: first_k_dense_replace=None does not say which layers "
                              "are mixture-of-experts; allowed: a layer count (int). Fix: set it in config.json to "
                              "what the checkpoint holds (its layers whose weights are mlp.experts.*)")


def test_a_moe_router_option_not_computed_is_refused_with_the_reason():
    with pytest.raises(UnsupportedTarget) as err:
        TARGETS["deepseek_v3"]().check(_deepseek(first_k_dense_replace=2, topk_method="group_limited_greedy"))
    assert str(err.value) == (
        "config.json: deepseek_v3 target: topk_method='group_limited_greedy' in its mixture-of-experts layers, "
        "which draftsmith does not compute; allowed: 'noaux_tc' (or the key absent). Fix: use a target whose "
        "config.json has an allowed value (editing this one would load its weights under another computation, whose "
        "logits are not the checkpoint's)")


# pins targets.py moe_layers: a type without MoE layers checks no key (also killed by the zoo tests)
def test_a_type_without_a_dense_count_checks_none():
    TARGETS["llama"]().check(SimpleNamespace(model_type="llama", num_hidden_layers=2, first_k_dense_replace=0))
