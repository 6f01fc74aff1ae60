"""Round 19 mutation kills for draftsmith/decoding/room.py: the GB in the refusal's numbers, and the CUDA free memory
(the driver's free memory plus what torch's caching allocator holds unused), checked on any machine with torch.cuda's
counters stubbed."""
import pytest
import torch

from draftsmith.decoding import room
from draftsmith.errors import ArgumentError


def test_the_refusal_says_the_need_and_the_free_memory_in_gib():
    with pytest.raises(ArgumentError) as e:
        room.check_room(3 << 30, torch.device("cpu"), 2, 128, free=1 << 30)
    text = str(e.value)
    assert "need 3.00 GB" in text and "has 1.00 GB free" in text
    assert "2 prompt(s) of up to 128 positions each" in text


def test_cuda_free_memory_is_the_driver_free_plus_the_allocator_unused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 700)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 200)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10_000, 80_000))
    assert room.free_bytes(torch.device("cuda:0")) == 10_000 + 700 - 200
