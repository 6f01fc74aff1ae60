"""Rotary angles made once per forward (Rotary.angles with a KVBatch's memo): the layers of one forward whose
rotations have the same frequencies share the first one's cos / sin; anything else computes its own."""
import pytest
import torch
from transformers import LlamaConfig

import draftsmith
from draftsmith.components import fused
from draftsmith.components.attention import KVBatch
from draftsmith.components.rope import Rotary


def rotary(theta: float = 10000.0, style: str = "neox") -> Rotary:
    return Rotary(LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=theta), 16, style)


@pytest.fixture
def made(monkeypatch):
    calls = []
    real = fused.rope_angles

    def counted(pos, inv_freq, scale, dtype):
        calls.append(dtype)
        return real(pos, inv_freq, scale, dtype)

    monkeypatch.setattr(fused, "rope_angles", counted)
    return calls


def test_equal_frequencies_share_one_forwards_angles(made):
    memo, pos = {}, torch.arange(6).view(2, 3)
    first = rotary().angles(pos, torch.float32, memo)
    again = rotary().angles(pos, torch.float32, memo)   # another layer's rotation, the same config
    assert len(made) == 1 and all(a is b for a, b in zip(first, again))


def test_other_frequencies_positions_or_dtypes_get_their_own(made):
    memo, pos = {}, torch.arange(6).view(2, 3)
    base = rotary().angles(pos, torch.float32, memo)
    other = rotary(theta=500000.0).angles(pos, torch.float32, memo)
    assert not torch.equal(base[0], other[0])
    moved = rotary().angles(pos + 1, torch.float32, memo)     # a new positions tensor: computed, not reused
    assert torch.equal(moved[0], rotary().angles(pos + 1, torch.float32)[0])
    half = rotary().angles(pos, torch.bfloat16, memo)
    assert half[0].dtype == torch.bfloat16 and len(made) == 5   # the last call above had no memo


def test_without_a_memo_every_call_computes(made):
    pos = torch.arange(4).view(1, 4)
    rotary().angles(pos, torch.float32)
    rotary().angles(pos, torch.float32)
    assert len(made) == 2


def test_the_shared_angles_are_the_ones_each_layer_would_compute():
    pos, memo = torch.arange(8).view(2, 4) * 3, {}
    rotary(style="interleaved").angles(pos, torch.float32, memo)   # the style does not change the angles
    cos, sin = rotary().angles(pos, torch.float32, memo)
    want = fused.rope_angles(pos, rotary().inv_freq, 1.0, torch.float32)
    assert torch.equal(cos, want[0]) and torch.equal(sin, want[1])


def test_a_kv_batch_memo_lives_for_one_forward():
    a, b = (KVBatch(None, torch.zeros(1, 1, dtype=torch.long), None, None) for _ in range(2))
    a.memo["x"] = 1
    assert b.memo == {} and a == b   # its own dict, and not part of the batch's equality


def test_a_target_forward_makes_its_angles_once(made):
    # the demo target's 8 layers share one rotary config: one set of angles per forward (the prefill and each
    # decode step), not one per layer
    model = draftsmith.assemble("demo")
    out = model.generate_baseline([5, 6, 7, 8], max_new_tokens=4, stop=[])
    assert len(out.token_ids) == 4 and len(made) == 4   # the prefill and 3 decode forwards
