"""A `conversations` list mixing a ShareGPT turn with a chat message is read as ShareGPT turns (any ShareGPT key
decides), so its problem names the ShareGPT keys (records.message_turns; planted as a bug by a review, h107, and
passed by the tests then)."""
import pytest

from draftsmith.train import records as R


def test_a_mixed_conversation_is_read_as_sharegpt_turns():
    mixed = [{"from": "human", "value": "hi"}, {"role": "assistant", "content": "hello"}]
    assert not R.message_turns(mixed)
    with pytest.raises(ValueError, match=r"conversations\[1\]\.value is missing \(its keys: 'content', 'role'\)"):
        R.jsonl_text({"conversations": mixed})
