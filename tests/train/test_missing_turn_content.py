"""A chat record's turn without its content key (`{"role": "user", "text": "hi"}`, a misnamed key) trained as an
empty turn, unsaid, where generate() refuses a message whose content is missing (h94): it is a ValueError naming the
field, the turn's index and its keys (the reader adds the file and line). null stays empty text, and a tool-calling
turn may leave its content out, as the OpenAI API does; an integer content was already said."""
import pytest

from draftsmith.train import records as R
from draftsmith.train.checks import TrainError

MESSAGE = 'expected a message object like {"role": "user", "content": "..."}, null for a message without text'


@pytest.mark.parametrize("render", [None, lambda turns: repr(turns)])
@pytest.mark.parametrize("record, says", [
    ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "text": "hi"}]},
     f"messages[1].content is missing (its keys: 'role', 'text'): {MESSAGE}"),
    ({"conversations": [{"from": "human"}]},
     "conversations[0].value is missing (its keys: 'from'): expected a turn object like {\"from\": \"human\", "
     '"value": "..."}, null for a turn without text'),
    ({"prompt": [{"role": "user"}], "completion": None}, f"prompt + completion[0].content is missing (its keys: "
                                                         f"'role'): {MESSAGE}"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content is 5: expected a string, null or a list"),
])
def test_a_turn_without_text_is_said_with_its_place(record, says, render):
    with pytest.raises(ValueError) as info:
        R.jsonl_text(record, render)
    assert str(info.value).startswith(says), str(info.value)


def test_null_and_a_tool_call_without_content_stay_empty_turns():
    assert R.jsonl_text({"messages": [{"role": "assistant", "tool_calls": []}, {"role": "user", "content": None},
                                      {"role": "user", "content": "x"}]}) == "\n\nx"


def test_the_reader_names_the_file_and_line(tmp_path):
    f = tmp_path / "chat.jsonl"
    f.write_text('{"text": "ok"}\n{"messages": [{"role": "user", "txt": "hi"}]}\n')
    with pytest.raises(TrainError) as info:
        R.jsonl_documents(f, f.read_text())
    assert f"{f}:2: messages[0].content is missing (its keys: 'role', 'txt')" in str(info.value), str(info.value)
