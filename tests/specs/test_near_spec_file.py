"""A spec reference that names no spec and no file, beside a YAML file whose name is a letter or a suffix away
(`mine.yam`, `./mine.yml`, `mine.ymal`), names that file (a new-user walk, 2026-12-01: only the built-in names were
listed). Far names and other folders' files are not suggested."""
from __future__ import annotations

from pathlib import Path

import pytest

import draftsmith
from draftsmith.errors import NotFound
from draftsmith.registry.registry import UnknownSpec
from draftsmith.specs.documents import near_file


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "my-draft.yaml").write_text("name: my-draft\n")
    (tmp_path / "notes.txt").write_text("")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("ref, kind", [("my-draft.yam", UnknownSpec), ("my-draf", UnknownSpec),
                                       ("my-draft", UnknownSpec), ("./my-draft.yml", NotFound),
                                       ("my-draft.ymal", UnknownSpec), ("my-drat.yaml", NotFound)])
def test_a_near_miss_names_the_file(folder, ref, kind):
    with pytest.raises(kind) as info:
        draftsmith.load_spec(ref)
    assert str(info.value).endswith("Did you mean the file 'my-draft.yaml'?"), str(info.value)


def test_a_near_miss_in_another_folder_names_the_file_there(folder):
    (folder / "sub").mkdir()
    (folder / "sub" / "other.yaml").write_text("name: other\n")
    with pytest.raises(NotFound) as info:
        draftsmith.load_spec("sub/othr.yaml")
    assert str(info.value).endswith(f"Did you mean the file {str(Path('sub', 'other.yaml'))!r}?")


@pytest.mark.parametrize("ref", ["zzz", "./zzz.yaml", "notes.txt.yaml"])
def test_nothing_close_is_no_suggestion(folder, ref):
    with pytest.raises((UnknownSpec, NotFound)) as info:
        draftsmith.load_spec(ref)
    assert "Did you mean the file" not in str(info.value)


def test_a_folder_that_does_not_list_is_no_suggestion(tmp_path):
    assert near_file(tmp_path / "gone" / "x.yaml") == ""
    assert near_file(tmp_path / "x.yaml") == ""
