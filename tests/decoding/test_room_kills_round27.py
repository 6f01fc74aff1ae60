"""Kills for decoding/room.py survivors (round 27): the refusal's sizes below a tenth of a GB are said in MB
(2**20 bytes, two decimals), and the switch to GB is at exactly a tenth of one (n >= GB / 10)."""
import pytest
import torch

from draftsmith.decoding import room
from draftsmith.errors import ArgumentError

GB = 1 << 30


def said(need: int, free: int) -> str:
    with pytest.raises(ArgumentError) as e:
        room.check_room(need, torch.device("cpu"), 1, 64, free=free)
    return str(e.value)


def test_a_need_under_a_tenth_of_a_gb_is_said_in_mib_with_two_decimals():
    """3 MiB and 1.5 MiB are 'need 3.00 MB' and '1.50 MB free' (the MB unit is 2**20 bytes, not 2**19 or 2**21)."""
    text = said(3 << 20, 3 << 19)
    assert "need 3.00 MB" in text and "has 1.50 MB free" in text, text


def test_the_switch_to_gb_is_at_a_tenth_of_a_gb():
    """just under GB / 10 is in MB (102.40 MB), just over it in GB (0.10 GB): the bound is GB / 10, not GB / 9 or
    GB / 11 (GB / 10 is no integer, so > and >= agree on every byte count)."""
    under, over = GB // 10, GB // 10 + 1
    assert room._size(under) == "102.40 MB"
    assert room._size(over) == "0.10 GB"
    assert room._size(GB // 11 + 1) == f"{(GB // 11 + 1) / (1 << 20):.2f} MB"   # 93.09 MB: under a tenth
    text = said(over, under)
    assert "need 0.10 GB" in text and "has 102.40 MB free" in text, text
