"""Mutation survivors of draftsmith.components.rope (round 26d: with_theta, position_limit, parity_limit's kinds):
with_theta changes the base alone (the config's rope type and scaling kept) on a copy (the config it is given
unchanged); position_limit is the fewest positions of any rotation; a dynamic rotation has a parity limit only when
asked for (the draft's note), never for the target's refusal (its limit is its context, refused as such)."""
import warnings

import pytest
import torch
from torch import nn
from transformers import LlamaConfig

from draftsmith.components.rope import (
    Rotary,
    position_limit,
    position_problems,
    with_theta,
)


def config(rope: dict, **top) -> LlamaConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LlamaConfig(hidden_size=32, num_attention_heads=2, max_position_embeddings=256, rope_parameters=rope,
                           **top)


# catches rope.py:69 `rope_parameters or {}` -> `and {}` (the config's rope type and factor dropped: a default rope)
def test_with_theta_keeps_the_config_s_rope_type_and_scaling():
    """A linear rope (factor 2) with base 5e5, rebased to 1e4: its frequencies are those of the linear rope with base
    1e4 (half the default's), and its rope_parameters keep rope_type and factor."""
    scaled = with_theta(config({"rope_type": "linear", "factor": 2.0, "rope_theta": 5e5}), 1e4)
    assert scaled.rope_parameters == {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}
    want = Rotary(config({"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}), 16)
    plain = Rotary(config({"rope_type": "default", "rope_theta": 1e4}), 16)
    torch.testing.assert_close(Rotary(scaled, 16).inv_freq, want.inv_freq, rtol=0, atol=0)
    torch.testing.assert_close(Rotary(scaled, 16).inv_freq, plain.inv_freq / 2)


# catches rope.py:67 copy.copy(config) -> config (the draft config itself rebased: what else reads it, e.g. another
# layer's auto or an export, would see the spec's base as the config's)
def test_with_theta_rebases_a_copy_and_leaves_the_config_alone():
    """with_theta returns another object, rebased at both places a base is kept; the config passed in keeps its
    rope_parameters and top-level rope_theta."""
    cfg = config({"rope_type": "default", "rope_theta": 5e5})
    cfg.rope_theta = 5e5
    before = dict(cfg.rope_parameters)
    out = with_theta(cfg, 10000)
    assert out is not cfg
    assert (out.rope_parameters["rope_theta"], out.rope_theta) == (10000.0, 10000.0)
    assert (cfg.rope_parameters, cfg.rope_theta) == (before, 5e5)


def longrope(limit: int) -> Rotary:
    return Rotary(config({"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 8,
                          "long_factor": [4.0] * 8, "original_max_position_embeddings": limit}), 16)


# catches rope.py:162 min(found) -> max(found)
def test_position_limit_is_the_fewest_positions_of_any_rotation():
    """Two longrope rotations at parity for 32 and 64 positions: the model's limit is 32, in either order."""
    assert position_limit(nn.ModuleList([longrope(64), longrope(32)])) == 32
    assert position_limit(nn.ModuleList([longrope(32), longrope(64)])) == 32


# catches rope.py:143 parity_limit's default kinds ("longrope",) -> ("longrope", "dynamic") and rope.py:158
# position_limit's alike (a dynamic target past its context refused a second time, as a longrope one)
def test_a_dynamic_rotation_has_a_limit_only_when_dynamic_is_asked_for():
    """A dynamic rope: no parity limit by default (a target's reading: position_problems says nothing, the context
    check refuses it), max_position_embeddings (256) when dynamic is among the kinds (the draft's note)."""
    rot = Rotary(config({"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}), 16)
    model = nn.ModuleList([rot])
    assert rot.parity_limit() is None and position_limit(model) is None
    assert position_problems(model, 250, 100) == []
    assert rot.parity_limit(("longrope", "dynamic")) == 256
    assert position_limit(model, ("dynamic",)) == 256


def test_a_rope_per_layer_type_stays_refused_with_a_stated_base():
    """Round 26d's finding: with_theta added a top-level rope_theta beside one rope per layer type, and the refusal
    (every value a mapping) no longer fired: a default rope was built, yarn lost."""
    from transformers import LlamaConfig

    from draftsmith.components.rope import inv_freq_for, with_theta
    from draftsmith.errors import CheckpointError

    cfg = LlamaConfig(hidden_size=32, num_attention_heads=2)
    cfg.rope_parameters = {"full_attention": {"rope_type": "default", "rope_theta": 1e4},
                           "sliding_attention": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 2.0}}
    with pytest.raises(CheckpointError, match="one rope per layer type"):
        inv_freq_for(with_theta(cfg, 10000), 16)
