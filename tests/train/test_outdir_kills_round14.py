"""A second run on a held --out is refused naming the folder: in full up to 300 characters, and beyond that cut in
the middle to at most 300 (errors.short_text), keeping the path's start and its last folder, so that a deep --out
neither floods the terminal nor loses the part that tells two runs' folders apart."""
from pathlib import Path

import pytest

from draftsmith.train.checks import TrainError
from draftsmith.train.outdir import held


def deep(base: Path, length: int) -> Path:
    """A folder under ``base`` whose path is exactly ``length`` characters (components kept under NAME_MAX)."""
    path = base
    while len(str(path)) < length:
        room = length - len(str(path)) - 1
        path = path / ("d" * min(room, 200)) if room > 0 else Path(str(path) + "x")
    assert len(str(path)) == length
    return path


def refusal(out: Path) -> str:
    """The text a second run on ``out`` is refused with, while a first holds it (its one problem, on field out)."""
    with held(out):
        with pytest.raises(TrainError) as refused:
            with held(out):
                pass
    [(field, text)] = refused.value.problems
    assert field == "out"
    return text


def test_an_out_of_300_characters_is_named_whole(tmp_path):
    # catches outdir.py:34 short_text(out, 300) -> short_text(out, 299)
    out = deep(tmp_path, 300)
    assert refusal(out).startswith(f"{out} is in use by another draftsmith train")


def test_a_longer_out_is_cut_in_the_middle_to_at_most_300_characters(tmp_path):
    # catches outdir.py:34 short_text(out, 300) -> short_text(out, 301)
    out = deep(tmp_path, 400) / "run-7"
    said = refusal(out).partition(" is in use by another draftsmith train")[0]
    assert len(said) <= 300 and "..." in said
    assert said.startswith(str(tmp_path)) and said.endswith("/run-7")   # the start and the folder's own name stay
