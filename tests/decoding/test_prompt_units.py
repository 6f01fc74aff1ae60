"""A prompt's problem is said in its own unit and names its place in a batch (decoding/prompts.py)."""
import pytest

from draftsmith.decoding.prompts import encode_prompts
from draftsmith.errors import short

CONTEXT = 8
BYTES = "bytes; a prompt is text (decode the bytes first) or token ids"


def problems(prompt) -> list[str]:
    out: list[str] = []
    encode_prompts(prompt, tokenizer=None, vocab=32, context=CONTEXT, problems=out)
    return out


@pytest.mark.parametrize("kind", [bytes, bytearray, lambda b: memoryview(bytes(b))])
def test_bytes_past_the_context_are_refused_as_bytes_not_as_tokens(kind):
    """Their length counts bytes: a long one is refused for what it is, as a short one is."""
    for n in (2, CONTEXT + 1):
        assert problems(kind(b"x" * n)) == [f"prompt: {BYTES}"]
        assert problems([[1, 2], kind(b"x" * n)]) == [f"prompt 1: {BYTES}"]


def test_an_id_list_past_the_context_is_still_refused_as_tokens():
    assert problems([[1, 2], [1] * (CONTEXT + 1)]) == [
        f"prompt 1: {CONTEXT + 1} tokens; the target's context (max_position_embeddings) is {CONTEXT}: 1 over; "
        f"shorten it to at most {CONTEXT} tokens (one new token then fits)"]


@pytest.mark.parametrize("kind", [set, frozenset, dict.fromkeys])
def test_a_set_or_mapping_past_the_context_is_no_prompt_not_that_many_tokens(kind):
    """Neither is a prompt at any length (no order): a long one is refused for what it is, as a short one is."""
    for n in (2, CONTEXT + 1):
        (one,) = problems(kind(range(n)))
        assert one.startswith(f"prompt: {short(kind(range(n)))} ({type(kind(())).__name__}) is not a prompt; ")
        (batch,) = problems([[1, 2], kind(range(n))])
        assert batch.startswith("prompt 1: ")
