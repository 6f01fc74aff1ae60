"""Mutation round 36 (part 3): rope.py's partial rotary width (rotary_dim, inv_freq_for's pairs) and
position_problems' boundary where no prompt fits the new tokens."""
import pytest
from transformers import LlamaConfig, Phi3Config

from draftsmith.components import rope
from draftsmith.components.rope import inv_freq_for, rotary_dim


def test_rotary_dim_reads_the_factor_only_when_partial():
    cfg = Phi3Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, partial_rotary_factor=0.5)
    assert rotary_dim(cfg, 16) == 16   # Llama's reading: whole heads whatever the key says
    assert rotary_dim(cfg, 16, partial=True) == 8


def test_one_channel_rotates_as_one_pair():
    # int(4 * 0.25) = 1: transformers rotates one pair (its cos is 2 wide), so it is no refusal
    cfg = Phi3Config(hidden_size=16, num_attention_heads=4, num_key_value_heads=4, partial_rotary_factor=0.25)
    assert rotary_dim(cfg, 4, partial=True) == 1
    inv, scale = inv_freq_for(cfg, 4, partial=True)
    assert inv.shape == (1,) and scale == 1.0


def test_an_odd_head_rotated_whole_is_refused_with_its_even_bound():
    # a head of 5 at factor 1: 5 channels round up to 3 pairs, 6 channels, past the head
    cfg = Phi3Config(hidden_size=20, num_attention_heads=4, num_key_value_heads=4)
    with pytest.raises(ValueError, match=r"rotates 5 channels; allowed: at least 1 and at most 4 \(whole pairs"):
        rotary_dim(cfg, 5, partial=True)
    assert rotary_dim(cfg, 6, partial=True) == 6


def test_an_odd_partial_width_takes_its_rounded_up_pairs_from_transformers():
    # int(32 * 0.3) = 9 channels: transformers' linear frequencies are arange(0, 9, 2), 5 pairs
    cfg = LlamaConfig(hidden_size=128, num_attention_heads=4, num_key_value_heads=4, head_dim=32,
                      rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0,
                                       "partial_rotary_factor": 0.3})
    inv, scale = inv_freq_for(cfg, 32, partial=True)
    assert inv.shape == (5,) and scale == 1.0


def test_new_tokens_one_past_the_limit_leave_no_prompt(monkeypatch):
    monkeypatch.setattr(rope, "position_limit", lambda model, kinds=("longrope",): 32)
    message, = rope.position_problems(None, 40, 33)   # 32 - 33 + 1 = 0: not even a one-token prompt
    assert message.endswith("no prompt fits with max_new_tokens 33: after a one-token prompt, at most 32 new "
                            "tokens fit"), message
