"""Kills for specs/documents.py survivors (round 22c): near_file quotes the file it suggests whole up to 300
characters and cut in the middle past them (its own short_text bound; the file-name bounds of spec_path, spec_file
and _regular are pinned by tests/specs/test_loader_kills_round17.py)."""
from pathlib import Path

import pytest

from draftsmith.specs.documents import near_file


def folder_of(tmp_path: Path, length: int) -> Path:
    """A folder under ``tmp_path`` whose 'mine.yaml' has a path of ``length`` characters (in parts of <= 200)."""
    folder, need = tmp_path, length - len(str(tmp_path / "mine.yaml"))
    while need > 0:
        part = min(need - 1, 200) if need > 1 else None
        assert part, "the temporary folder's path is too long for this length"
        folder, need = folder / ("d" * part), need - part - 1
    folder.mkdir(parents=True)
    assert len(str(folder / "mine.yaml")) == length
    (folder / "mine.yaml").write_text("name: mine\n")
    return folder


@pytest.mark.parametrize("length", [300, 400])
def test_the_suggested_file_is_quoted_whole_up_to_300_characters(tmp_path, length):
    """300 characters are shown whole (kills a bound of 299); 400 are cut to 148 + '...' + 148 (kills 301)."""
    folder = folder_of(tmp_path, length)
    shown = str(folder / "mine.yaml")
    if length > 300:
        shown = shown[:148] + "..." + shown[-148:]
    assert near_file(folder / "mine.yam", ".") == f". Did you mean the file {shown!r}?"
    assert len(shown) == (300 if length == 300 else 299)
