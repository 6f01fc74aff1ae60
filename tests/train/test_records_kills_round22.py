"""Kills for train/records.py survivors (round 22): a .json file's record places (FILE:LINE:COLUMN) count a
newline at the file's first character, and a .json array is followed by nothing but whitespace; a field of the
wrong type is quoted at the width its message states."""
from __future__ import annotations

from pathlib import Path

import pytest

from draftsmith.train.checks import TrainError
from draftsmith.errors import short
from draftsmith.train.records import json_documents, jsonl_text


def test_a_json_record_after_a_leading_newline_is_placed_on_line_2():
    """A file that opens with "\\n" holds its object on line 2, column 1: the scan for newlines before a record
    starts at offset 0 (from offset 1 the first line break was missed: "1:2")."""
    f = Path("d.json")
    textless: list[str] = []
    assert json_documents(f, '\n{"other": 1}\n', textless) == [] and textless == [f"{f}:2:1"]
    textless = []
    assert json_documents(f, '\n[{"text": "a"},\n {"x": 1}]', textless) == ["a"] and textless == [f"{f}:3:2"]


@pytest.mark.parametrize("text, column", [("[]x", 3), ('[{"text": "a"}]x', 16)])
def test_one_character_after_a_json_array_is_extra_data(text, column):
    """The check for content past the array starts right after its "]": one stray character there is refused as
    json.loads refuses it (checked from one further on, "[]x" read as an empty file)."""
    with pytest.raises(TrainError) as info:
        json_documents(Path("d.json"), text)
    assert str(info.value) == f"d.json:1: not valid JSON (Extra data at column {column})"


LONG = {"a": "x" * 100}   # short() cuts its repr at the width asked for


@pytest.mark.parametrize("record, field", [({"text": LONG}, "text"), ({"prompt": LONG}, "prompt"),
                                           ({"messages": LONG}, "messages"),
                                           ({"conversations": LONG}, "conversations")])
def test_a_field_of_the_wrong_type_is_quoted_in_60_characters(record, field):
    """The value a field of the wrong type holds is quoted cut to 60 characters (the width each of these messages
    gives it)."""
    with pytest.raises(ValueError) as info:
        jsonl_text(record)
    quoted = str(info.value).removeprefix(f"{field} is ").split(": expected")[0]
    assert quoted == short(LONG, 60) and len(quoted) == 60, quoted
