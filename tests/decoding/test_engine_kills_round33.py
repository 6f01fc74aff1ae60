"""Mutation round 33 (decoding/overflow.py): the message names at most eight overflowed prompts, each by its index
and the tokens it had, and only a row's kept tokens are looked at."""
import pytest
import torch

from draftsmith.decoding.overflow import first_overflow, refuse_overflow
from draftsmith.errors import DecodingError


def test_the_first_eight_overflowed_prompts_are_named_and_no_more():
    with pytest.raises(DecodingError) as e:
        refuse_overflow([(i, i) for i in range(10)], torch.float32, "generate()")
    msg = str(e.value)
    assert msg.startswith("generate(): the target's logits hold NaN or +inf"), msg
    assert all(f"prompt {i} after {i} new tokens" in msg for i in range(8)), msg
    assert "prompt 8" not in msg and "prompt 9" not in msg and " and more;" in msg, msg
    with pytest.raises(DecodingError) as e:
        refuse_overflow([(i, 0) for i in range(8)], torch.float16, "generate_baseline()")
    assert "and more" not in str(e.value) and "dtype float16" in str(e.value) and "bfloat16" in str(e.value)
    refuse_overflow([], torch.float16, "generate()")   # nothing overflowed: no error


def test_only_the_kept_tokens_flags_count():
    assert first_overflow([0, 1, 1], 1) is None
    assert first_overflow([0, 1, 1], 2) == 1
    assert first_overflow([1, 0], 0) is None
    assert first_overflow([0, 0, 1], 3) == 2
