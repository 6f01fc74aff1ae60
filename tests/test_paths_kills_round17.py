"""Kills survivors of scripts/mutate.py on draftsmith/paths.py (checkpoint_folder's messages)."""
import pytest

from draftsmith.errors import CheckpointNotFound
from draftsmith.paths import checkpoint_folder


def test_nul_in_folder_name_says_why(tmp_path):
    """A NUL raises ValueError (no strerror): the message is the error's own text, not 'None'
    (kills `strerror or e` -> `strerror and e`)."""
    with pytest.raises(CheckpointNotFound) as err:
        checkpoint_folder(f"{tmp_path}/a\0b")
    assert str(err.value).endswith("cannot be read: embedded null byte"), str(err.value)


def test_name_too_long_says_strerror_only(tmp_path):
    """An OSError with a strerror is said by it alone, not by its repr-like '[Errno 36] ...: path'."""
    with pytest.raises(CheckpointNotFound) as err:
        checkpoint_folder(tmp_path / ("x" * 300))
    assert str(err.value).endswith("cannot be read: File name too long"), str(err.value)


def test_path_of_300_characters_is_shown_whole(tmp_path):
    """The folder is quoted in at most 300 characters: one of exactly 300 whole (kills 300 -> 299)."""
    base = str(tmp_path)
    tail = 300 - len(base) - 1
    parts = []
    while tail > 0:   # components under the file system's 255-byte limit, each with its '/'
        n = min(tail, 100)
        parts.append("d" * (n - 1))
        tail -= n
    path = "/".join([base, *parts])
    path += "e" * (300 - len(path))
    assert len(path) == 300
    with pytest.raises(CheckpointNotFound) as err:
        checkpoint_folder(path)
    assert str(err.value) == f"checkpoint folder {path} does not exist"


def test_long_path_cut_to_300_characters(tmp_path):
    """A longer one is cut in the middle to at most 300 characters: 148 + '...' + 148 (kills 300 -> 301, which
    shows 301)."""
    path = str(tmp_path / ("a" * 200) / ("b" * 200))
    with pytest.raises(CheckpointNotFound) as err:
        checkpoint_folder(path)
    shown = str(err.value).removeprefix("checkpoint folder ").removesuffix(" does not exist")
    assert len(shown) <= 300 and "..." in shown, shown
    assert shown == f"{path[:148]}...{path[len(path) - 148:]}"
