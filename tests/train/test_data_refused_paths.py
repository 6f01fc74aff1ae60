"""Training data the file system refuses is an error naming the path, never skipped (a train user's hunt,
2026-12-01): a named --data file without read permission was counted as "skipped (not UTF-8 text, or unreadable)"
and training went on without it; a --data folder that cannot be listed was "no text or JSONL files"; an unreadable
subfolder was dropped without a word (pathlib's rglob swallows it). Root reads any file, so the refusals are made
by stand-ins of the file system calls."""
import os
from pathlib import Path

import pytest

from draftsmith.train import data as D
from draftsmith.train.checks import TrainError


def refuse(monkeypatch, *paths: Path):
    """Reading or listing any of ``paths`` raises PermissionError, as for a user without the right."""
    denied = {str(p) for p in paths}
    read_text, scandir = Path.read_text, os.scandir

    def reading(self, *a, **k):
        if str(self) in denied:
            raise PermissionError(13, "Permission denied", str(self))
        return read_text(self, *a, **k)

    def listing(path="."):
        if os.fspath(path) in denied:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(Path, "read_text", reading)
    monkeypatch.setattr(os, "scandir", listing)


def test_a_file_it_may_not_read_is_named_with_every_other_files_problem(tmp_path, monkeypatch):
    good, secret, bad = tmp_path / "good.jsonl", tmp_path / "secret.jsonl", tmp_path / "bad.jsonl"
    good.write_text('{"text": "a"}\n')
    secret.write_text('{"text": "b"}\n')
    bad.write_text("not json\n")
    refuse(monkeypatch, secret)
    skipped = []
    with pytest.raises(TrainError) as e:
        D.read_documents([good, secret, bad], skipped)
    assert f"{secret}: Permission denied" in str(e.value) and f"{bad}:1" in str(e.value), str(e.value)
    assert skipped == []


@pytest.mark.parametrize("locked", ["top", "sub"])
def test_a_folder_it_may_not_list_is_named(tmp_path, monkeypatch, locked):
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "data" / "sub" / "more.jsonl").write_text('{"text": "b"}\n')
    folder = tmp_path / "data" if locked == "top" else tmp_path / "data" / "sub"
    refuse(monkeypatch, folder)
    with pytest.raises(PermissionError) as e:
        D.expand([tmp_path / "data"])
    assert e.value.filename == str(folder)


def test_a_hidden_folder_it_may_not_list_is_not_read_anyway(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.txt").write_text("text")
    refuse(monkeypatch, tmp_path / ".git")
    assert D.expand([tmp_path]) == [tmp_path / "a.txt"]


def test_folders_are_walked_as_before(tmp_path):
    """Files under folders, sorted, text and JSONL only, hidden ones and __pycache__ left out, links to folders not
    followed."""
    for name in ("b/x.jsonl", "a.txt", "b/c/y.md", ".venv/z.txt", "__pycache__/p.txt", "w.bin"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("t")
    (tmp_path / "link").symlink_to(tmp_path / "b", target_is_directory=True)
    found = [f.relative_to(tmp_path).as_posix() for f in D.expand([tmp_path])]
    assert found == ["a.txt", "b/c/y.md", "b/x.jsonl"], found
