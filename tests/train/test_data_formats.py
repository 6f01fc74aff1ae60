""".json datasets and record-file held-out text: a .json file holding an array of records (or one record) is read
record by record, as JSONL lines are (ShareGPT's `conversations` too, the shape EAGLE's own data has), with bad
records named by file, line and column; and a .jsonl / .json --eval file gives one candidate prompt per record, not
its JSON syntax."""
import json
import re
from types import SimpleNamespace

import pytest

from draftsmith.train import data as D
from draftsmith.train import records as R
from draftsmith.train.checks import TrainError
from draftsmith.train.data_checks import no_windows


def chars(texts, add_special_tokens=True):
    """One id per character (its code point), after a BOS id 1 when asked for special tokens."""
    one = lambda t: [1] * add_special_tokens + [ord(c) for c in t]  # noqa: E731
    return {"input_ids": one(texts) if isinstance(texts, str) else [one(t) for t in texts]}


def sharegpt(*turns):
    return {"id": "x", "conversations": [{"from": ("human", "gpt")[i % 2], "value": v} for i, v in enumerate(turns)]}


# --- ShareGPT records --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("record, text", [
    (sharegpt("hi", "hello"), "hi\nhello"),
    ({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": None},
                        {"from": "gpt", "value": None},
                        {"value": [{"type": "text", "text": "p"}]}]}, "s\n\n\np"),
    ({"conversations": []}, ""),
    ({"messages": [{"role": "user", "content": "m"}], "conversations": [{"from": "human", "value": "c"}]}, "m"),
    ({"text": "t", "conversations": [{"from": "human", "value": "c"}]}, "t"),
    ({"conversations": None}, None),
])
def test_sharegpt_conversations_give_their_values_joined_as_messages_do(record, text):
    assert R.jsonl_text(record) == text


def test_sharegpt_jsonl_lines_are_documents(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps(sharegpt("q1", "a1")) + "\n" + json.dumps(sharegpt("q2", "a2")) + "\n")
    assert D.read_documents([f]) == ["q1\na1", "q2\na2"]


# --- .json datasets ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_of_records_is_one_document_per_record(tmp_path, indent):
    f = tmp_path / "sharegpt.json"   # ShareGPT as EAGLE's training data ships it; any record shape JSONL reads
    f.write_text(json.dumps([sharegpt("q1", "a1"), {"text": "t"}, {"prompt": "p", "completion": "c"},
                             {"messages": [{"role": "user", "content": "m"}]}], indent=indent))
    assert D.read_documents([f]) == ["q1\na1", "t", "pc", "m"]


def test_a_json_file_holding_one_record_is_one_document(tmp_path):
    f = tmp_path / "one.json"
    f.write_text(' \n' + json.dumps(sharegpt("q", "a"), indent=1) + "\n")
    assert D.read_documents([f]) == ["q\na"]


def test_a_json_dataset_in_a_folder_is_read_as_records_beside_text_files(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.json").write_text(json.dumps([{"text": "one"}, {"text": "two"}]))
    (tmp_path / "c.jsonl").write_text('{"text": "three"}\n')
    assert D.read_documents(D.expand([tmp_path])) == ["x = 1\n", "one", "two", "three"]


def test_json_records_without_text_are_counted_by_file_line_and_column(tmp_path):
    f = tmp_path / "d.json"
    f.write_text('[{"question": "q"},\n  {"text": ""}, {"conversations": []},\n {"text": "kept"}]')
    textless = []
    assert D.read_documents([f], textless=textless) == ["kept"]
    assert textless == [f"{f}:1:2", f"{f}:2:3", f"{f}:2:17"]
    g = tmp_path / "config.json"   # one object of another schema: no text, counted, not trained on as JSON syntax
    g.write_text('{"hidden_size": 64}')
    textless = []
    assert D.read_documents([g], textless=textless) == [] and textless == [f"{g}:1:1"]
    job = SimpleNamespace(data=[tmp_path], seq=48)
    assert f"1 record without text skipped (no text, prompt, completion, messages or conversations field, or an " \
           f"empty one): {g}:1:1" in str(no_windows(job, [g], [], [], (), textless))


@pytest.mark.parametrize("text", ["", " \n", "[]", "[ \n ]"])
def test_an_empty_json_dataset_gives_no_document(tmp_path, text):
    f = tmp_path / "d.json"
    f.write_text(text)
    textless = []
    assert D.read_documents([f], textless=textless) == [] and textless == []


@pytest.mark.parametrize("text, says", [
    ("5", "1:1: a JSON array of records or one record object is expected, found 5"),
    ('\n "a string"', '2:2: a JSON array of records or one record object is expected, found \'a string\''),
    ("null", "1:1: a JSON array of records or one record object is expected, found None"),
    ('[{"text": "a"},\n 1, 2]', "2:2: a JSON object is expected, found 1"),
    ('[["a"]]', "1:2: a JSON object is expected, found ['a']"),
    ('[{"text": "a"},\n {"text": 5}]', "2:2: text is 5: expected a string or null"),
    ('[{"text": "a"}, {"conversations": "x"}]', "1:17: conversations is 'x': expected a list of turns"),
    ('[{"text": "a \\ud800"}]', "1:2: the text holds a lone surrogate (U+D800 at character 2)"),
])
def test_json_content_that_is_not_records_is_refused_by_file_and_line(tmp_path, text, says):
    f = tmp_path / "d.json"
    f.write_text(text)
    with pytest.raises(TrainError, match="^" + re.escape(f"{f}:{says}")):
        D.read_documents([f])


@pytest.mark.parametrize("text, says", [
    ('[{"text": "a"},\n {"text": "b"}', "2: not valid JSON (Expecting ',' delimiter at column 15)"),
    ('[{"text": "a"},\n {"text" "b"}]', "2: not valid JSON (Expecting ':' delimiter at column 10)"),
    ('[{"text": "a"},]', "1: not valid JSON (Expecting value at column 16)"),
    ('{"text": "a"}\n{"text": "b"}', "2: not valid JSON (Extra data at column 1)"),
    ('[{"text": "a"}] x', "1: not valid JSON (Extra data at column 17)"),
    ("{bad", "1: not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
    ("nul", "1: not valid JSON (Expecting value at column 1)"),
    ('[{"text": "a"},\n {"text": ' + "[" * 100000 + "]" * 100000 + "}]", "2:2: not usable JSON (RecursionError)"),
    ('[{"n": 1' + "0" * 5000 + "}]", "1:2: not usable JSON (ValueError)"),
], ids=["no-close", "no-colon", "trailing-comma", "two-objects", "extra", "garbage", "nul", "deep", "long-int"])
def test_malformed_json_is_one_bounded_error_naming_the_file_and_line(tmp_path, text, says):
    """Syntax errors read as the JSONL path's ("FILE:LINE: not valid JSON (... at column C)"); a record too deep or
    with too long an integer is named by where it starts."""
    f = tmp_path / "d.json"
    f.write_text(text)
    with pytest.raises(TrainError) as e:
        D.read_documents([f])
    assert str(e.value) == f"{f}:{says}", str(e.value)[:500]


def test_a_json_dataset_that_is_not_utf8_is_refused_like_jsonl(tmp_path):
    f = tmp_path / "b.json"
    f.write_bytes(b'[{"text": "a"}, \xff]')
    with pytest.raises(TrainError, match=re.escape(f"{f}: not UTF-8 text (byte 0xff at offset 16), so not JSON")):
        D.read_documents([f], skipped=[])


def test_a_json_dataset_with_a_byte_order_mark_and_crlf_lines_reads(tmp_path):
    f = tmp_path / "d.json"
    f.write_bytes(b'\xef\xbb\xbf[\r\n {"text": "a"},\r\n {"bad": 1}\r\n]\r\n')
    textless = []
    assert D.read_documents([f], textless=textless) == ["a"] and textless == [f"{f}:3:2"]


# --- held-out prompts from record files --------------------------------------------------------------------------

def long_text(tag, n=120):
    return "".join(f"{tag}{k:02d}" + "." * 16 + "\n" for k in range(n // 20))


def test_held_out_jsonl_gives_one_prompt_per_record_from_its_text_not_its_json(tmp_path):
    """The reviewer's case: an eval.jsonl of 4 `messages` records gave 1 prompt of JSON syntax."""
    f = tmp_path / "eval.jsonl"
    texts = [long_text(t) for t in "ABCD"]
    f.write_text("".join(json.dumps({"messages": [{"role": "user", "content": t}]}) + "\n" for t in texts))
    prompts = D.held_out_prompts(D.expand([tmp_path]), chars, n=8, prompt_tokens=20)
    assert sorted(bytes(p).decode() for p in prompts) == sorted(t[:20] for t in texts)


def test_held_out_json_sharegpt_gives_one_prompt_per_record_with_enough_tokens(tmp_path):
    """Each record is a candidate from its start; a record needs prompt_tokens + 64 tokens as a file does."""
    f = tmp_path / "eval.json"
    records = [sharegpt("Q0", long_text("a")), sharegpt("Q1", "short"), {"x": 1}, sharegpt("Q3", long_text("c"))]
    f.write_text(json.dumps(records, indent=2))
    prompts = D.held_out_prompts([f], chars, n=8, prompt_tokens=10)
    assert sorted(bytes(p).decode() for p in prompts) == ["Q0\na00....", "Q3\nc00...."]


def test_held_out_records_are_a_seeded_choice_and_text_files_stay_as_they_were(tmp_path):
    text = tmp_path / "t.py"
    text.write_text(long_text("T", 180))   # a third in: line 3 of 9
    rec = tmp_path / "r.jsonl"
    rec.write_text("".join(json.dumps({"text": long_text(f"R{i}")}) + "\n" for i in range(6)))
    files = [text, rec]
    every = D.held_out_prompts(files, chars, n=20, prompt_tokens=10)
    assert sorted(bytes(p).decode() for p in every) == sorted(["T03" + "." * 7] + [f"R{i}00" + "." * 6
                                                                                   for i in range(6)])
    three = D.held_out_prompts(files, chars, n=3, prompt_tokens=10, seed=4)
    assert len(three) == 3 and three == D.held_out_prompts(files, chars, 3, 10, seed=4)
    assert all(p in every for p in three)
    assert any(D.held_out_prompts(files, chars, 3, 10, seed=s) != three for s in range(5, 10))


def test_held_out_plain_json_that_is_not_records_is_refused_like_training_data(tmp_path):
    f = tmp_path / "eval.json"
    f.write_text("[1, 2]")
    with pytest.raises(TrainError, match=re.escape(f"{f}:1:2: a JSON object is expected, found 1")):
        D.held_out_prompts([f], chars, n=2, prompt_tokens=10)
