"""Paths `draftsmith train` cannot use, refused by preflight (exit 2) before the data is read and before anything
is written: an --out or --features that cannot be made a folder (under a regular file, in /proc), so that a run is
never left with a trainer.pt it cannot resume; and --data / --eval that is neither a regular file nor a folder."""
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.train.checks import TrainError
from draftsmith.train.preflight import preflight

PROC = Path("/proc/self").is_dir()


def train(*args):
    return CliRunner().invoke(app, ["train", *map(str, args)], env={"COLUMNS": "1000"})


def refused(res, *texts):
    assert res.exit_code == 2, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output, res.output
    said = " ".join(res.output.split())
    for t in texts:
        assert t in said, res.output
    return said


@pytest.fixture
def afile(tmp_path):
    (tmp_path / "afile").write_text("mine")
    return tmp_path / "afile"


@pytest.fixture
def small(tiny, tmp_path):
    """A command line that trains one step on two windows of the tiny target, once given --out."""
    return ["--target", tiny / "target", "--data", tiny / "data", "--steps", 1, "--batch", 1, "--max-windows", 2,
            "--seq", 16, "--draft-vocab", 96, "--eval-prompts", 0]


@pytest.fixture
def nothing_read(monkeypatch):
    """The test fails if the data is read (preflight alone must refuse)."""
    from draftsmith.train import data as D

    monkeypatch.setattr(D, "read_documents", lambda *a, **k: pytest.fail("read the data"))


@pytest.mark.parametrize("out, says", [("{afile}/sub", "--out {afile}/sub: cannot be created: {afile} is not a folder"),
                                       ("{afile}", "--out {afile}: is not a folder")]
                         + ([("/proc/draftsmith-o", "--out /proc/draftsmith-o: cannot be created in /proc")]
                            if PROC else []))
def test_an_out_that_cannot_be_a_folder_is_refused_before_the_data_is_read(small, afile, nothing_read, out, says):
    refused(train(*small, "--out", out.format(afile=afile)), says.format(afile=afile))
    assert afile.read_text() == "mine"


@pytest.mark.parametrize("feats", ["{afile}/feat", "{afile}"] + (["/proc/draftsmith-feat"] if PROC else []))
def test_features_that_cannot_be_a_folder_are_refused_before_trainer_pt_is_written(small, afile, tmp_path, feats):
    """The review's run: --features in /proc wrote OUT/trainer.pt at step 0, then failed (internal error); a rerun
    without --features asked for that folder again. Now nothing is written and the message names --features."""
    feats = feats.format(afile=afile)
    out = tmp_path / "o13"
    refused(train(*small, "--out", out, "--features", feats), f"--features {feats}: ")
    assert not out.exists()
    res = train(*small, "--out", out)   # and the run then goes with a usable features folder
    assert res.exit_code == 0, res.output
    assert (out / "trainer.pt").is_file()


def test_the_api_refuses_the_same_paths(job, afile, tmp_path):
    with pytest.raises(TrainError) as e:
        preflight(job(afile / "out", features=afile / "feat"))
    assert [name for name, _ in e.value.problems] == ["out", "features"]
    with pytest.raises(TrainError) as e:   # the default features folder (OUT/features) is said with --out
        preflight(job(afile))
    assert [name for name, _ in e.value.problems] == ["out"] and "is not a folder" in str(e.value)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_data_that_is_a_device_is_named_as_such(small, tmp_path, nothing_read):
    refused(train(*small, "--out", tmp_path / "o", "--data", "/dev/zero", "--eval", "/dev/null"),
            "--data /dev/zero: is a device or socket, not a regular file or folder",
            "--eval /dev/null: is a device or socket, not a regular file or folder")
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_data_that_is_a_fifo_is_named_as_such(small, tmp_path, nothing_read):
    os.mkfifo(tmp_path / "pipe")
    missing = tmp_path / "missing.txt"
    refused(train(*small, "--out", tmp_path / "o", "--data", tmp_path / "pipe", "--data", missing),
            f"--data {tmp_path / 'pipe'}: is a FIFO, not a regular file or folder",
            f"--data {missing}: no such file or folder")
