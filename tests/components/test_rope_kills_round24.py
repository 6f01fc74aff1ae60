"""Kills for components/rope.py survivors (round 24): which rotations have a parity limit (longrope alone, and only
with a numeric original_max_position_embeddings), and the problem a prompt of exactly that length is given."""
import warnings

import pytest
from torch import nn
from transformers import LlamaConfig

from draftsmith.components.rope import Rotary, position_limit, position_problems

LIMIT = 64


def config(scaling: dict) -> LlamaConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LlamaConfig(hidden_size=32, num_attention_heads=2, max_position_embeddings=256, rope_scaling=scaling)


def longrope() -> Rotary:
    return Rotary(config({"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [4.0] * 8,
                          "original_max_position_embeddings": LIMIT}), 16)


def test_a_yarn_rotation_has_no_parity_limit_though_its_config_names_original_positions():
    """yarn (like every rope type but longrope) holds up to the context: its original_max_position_embeddings is
    no limit, so a yarn target is never refused past it."""
    rot = Rotary(config({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": LIMIT}), 16)
    assert rot.config.rope_parameters["original_max_position_embeddings"] == LIMIT
    assert rot.parity_limit() is None
    assert position_limit(nn.ModuleList([rot])) is None
    assert position_problems(nn.ModuleList([rot]), LIMIT + 10, 20) == []


@pytest.mark.parametrize("junk", [None, True, "64"])
def test_a_longrope_limit_that_is_no_number_is_no_limit(junk):
    """parity_limit takes original_max_position_embeddings only when it is an int or float, not a bool: None (or
    a string) is no limit rather than a TypeError, and true is not read as a limit of 1 position."""
    rot = longrope()
    assert rot.parity_limit() == LIMIT
    rot.config.rope_parameters = {**rot.config.rope_parameters, "original_max_position_embeddings": junk}
    assert rot.parity_limit() is None


def test_a_prompt_of_exactly_the_limit_is_told_how_many_new_tokens_fit():
    """A prompt of exactly original_max_position_embeddings tokens fits (one new token does): asking for two is a
    max_new_tokens problem ("at most 1 new token fits"), not a prompt-length one."""
    model = nn.ModuleList([longrope()])
    assert position_problems(model, LIMIT, 1) == []
    [why] = position_problems(model, LIMIT, 2)
    assert why.startswith(f"max_new_tokens is 2: with a {LIMIT}-token prompt it runs past {LIMIT} positions"), why
    assert why.endswith("at most 1 new token fits (the last one is never fed)"), why
    [why] = position_problems(model, LIMIT + 1, 1)
    assert why.startswith(f"a {LIMIT + 1}-token prompt + max_new_tokens 1 runs past {LIMIT} positions"), why
