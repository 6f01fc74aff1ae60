"""Kills survivors of scripts/mutate.py on draftsmith/assembler/folders.py (checkpoint_dir's quoting limits)."""
from pathlib import Path

import pytest

from draftsmith.assembler.folders import checkpoint_dir
from draftsmith.errors import CheckpointNotFound, OptionError
from draftsmith.specs.loader import load_spec


def path_of(base: Path, length: int) -> str:
    """A path under ``base`` of exactly ``length`` characters, its names under 255 bytes."""
    path = str(base)
    while len(path) < length:
        path += "/" + "d" * min(100, length - len(path) - 1)
    assert len(path) == length, path
    return path


@pytest.mark.parametrize("length", [300, 400])
def test_a_given_folder_is_quoted_whole_up_to_300_characters(tmp_path, length):
    """line 71: short_text(ref, 300): exactly 300 whole (kills 299), longer cut to 148 + '...' + 148 (kills 301)."""
    path = path_of(tmp_path, length)
    with pytest.raises(CheckpointNotFound) as err:
        checkpoint_dir(None, path, "target")
    shown = path if length <= 300 else f"{path[:148]}...{path[-148:]}"
    assert str(err.value) == f"target checkpoint folder '{shown}' does not exist"


@pytest.mark.parametrize("written", ["w" * 200, "a" * 150 + "/" + "b" * 150])
def test_the_specs_relative_folder_is_quoted_whole_up_to_200_characters(tmp_path, written):
    """line 73: short_text(written, 200): exactly 200 whole (kills 199), longer cut to 98 + '...' + 98 (kills 201)."""
    (tmp_path / "specs").mkdir()
    file = tmp_path / "specs" / "rel.yaml"
    file.write_text(f"name: rel\ncheckpoints: {{draft: {written}}}\n"
                    "draft:\n  fusion: {kind: eagle3, norm_before_residual: false}\n")
    spec = load_spec(file)
    with pytest.raises(CheckpointNotFound) as err:
        checkpoint_dir(spec, None, "draft")
    shown = written if len(written) <= 200 else f"{written[:98]}...{written[-98:]}"
    assert f" (the spec's checkpoints.draft: '{shown}', relative to its file) does not exist" in str(err.value), \
        str(err.value)
    assert str(err.value).endswith(f"'{shown}', relative to its file) does not exist")


@pytest.mark.parametrize("given", [b"x" * 97, b"x" * 300])
def test_a_bytes_folder_is_quoted_whole_up_to_100_characters(given):
    """line 59: short_text(repr(given), 100): a repr of exactly 100 whole (kills 99), longer cut to 48 + '...' + 48
    (kills 101)."""
    with pytest.raises(OptionError) as err:
        checkpoint_dir(None, given, "draft")
    text = repr(given)
    shown = text if len(text) <= 100 else f"{text[:48]}...{text[-48:]}"
    assert str(err.value) == f"draft: a folder path (a str or os.PathLike), got the bytes {shown}"
