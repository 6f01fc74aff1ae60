"""SpecForge's data preparation (scripts/prepare_data.py) writes its ShareGPT and UltraChat records as
``{"id", "conversations": [{"role": "user", "content": ...}, ...]}``: chat messages under the ShareGPT field name.
They are read as messages (their contents, or rendered by --chat's template with their roles), where the reader
took them for ShareGPT turns without a value: refused since h94 ("conversations[0].value is missing"), and before
that trained as empty text. ShareGPT's own {"from", "value"} turns read as before, and a turn of neither form is
still refused naming the ShareGPT keys."""
import pytest

from draftsmith.train import records as R

SPECFORGE = {"id": "sharegpt_0", "conversations": [{"role": "user", "content": "What is 2+2?"},
                                                    {"role": "assistant", "content": "4"}]}


def test_specforge_conversations_read_as_messages():
    assert R.jsonl_text(SPECFORGE) == "What is 2+2?\n4"
    assert R.jsonl_text(SPECFORGE, render=repr) == repr(SPECFORGE["conversations"])


def test_sharegpt_turns_read_as_before():
    record = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    assert R.jsonl_text(record) == "hi\nhello"
    assert R.jsonl_text(record, render=repr) == repr([{"role": "user", "content": "hi"},
                                                      {"role": "assistant", "content": "hello"}])


@pytest.mark.parametrize("turns, says", [
    ([{"from": "human"}], "conversations[0].value is missing (its keys: 'from')"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "text": "b"}],
     "conversations[1].content is missing (its keys: 'role', 'text')"),
])
def test_a_turn_without_its_text_is_still_said(turns, says):
    with pytest.raises(ValueError) as info:
        R.jsonl_text({"conversations": turns})
    assert str(info.value).startswith(says), str(info.value)
