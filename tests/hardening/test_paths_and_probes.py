"""Paths the file system refuses (under a regular file, too long, a NUL, /proc), convert's own config fields, and
``doctor --probe @FILE`` that is no regular file or too big: each ends in one clear message, never an internal
error, and before the source is read."""
import errno
import os
import threading
import time
from pathlib import Path

import pytest
from hardening_helpers import copy_folder, make_fifo, refused
from typer.testing import CliRunner

from draftsmith import limits
from draftsmith.cli import app
from draftsmith.convert.canonical import ConvertError
from draftsmith.convert.run import convert
from draftsmith.testing import edit_config

LONG = "n" * 300   # one file name past NAME_MAX (255): ENAMETOOLONG


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000"})


def user_error(res, says: str, code: int = 1) -> None:
    assert res.exit_code == code, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output, res.output
    assert says in res.stderr, res.output
    assert len(res.stderr) < 5000


# --- 1. convert's output folder: checked before the source is read; a write that fails is said --------------------

@pytest.fixture
def no_reading(monkeypatch):
    """The source must not be read: the output folder is refused first."""
    def read(*a, **k):
        raise AssertionError("the source was read before the output folder was checked")

    monkeypatch.setattr("draftsmith.convert.run.read_canonical", read)


def test_convert_refuses_an_output_folder_under_a_regular_file_first(tiny_pair, tmp_path, no_reading):
    (tmp_path / "afile").write_text("keep me")
    res = run("convert", tiny_pair[1], "--to", "speculators", tmp_path / "afile" / "sub")
    user_error(res, f"cannot create the output folder {tmp_path / 'afile' / 'sub'}")
    assert (tmp_path / "afile").read_text() == "keep me"


@pytest.mark.parametrize("name", [LONG, f"{LONG}/x", f"ok/{LONG}"], ids=["long", "long-parent", "long-child"])
def test_convert_refuses_an_output_name_too_long_first(tiny_pair, tmp_path, no_reading, name):
    res = run("convert", tiny_pair[1], "--to", "speculators", tmp_path / name)
    user_error(res, "cannot create the output folder")
    assert sorted(os.listdir(tmp_path)) == []   # the parent 'ok' it made is removed again


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_convert_refuses_an_output_folder_in_proc_first(tiny_pair, no_reading):
    user_error(run("convert", tiny_pair[1], "--to", "speculators", "/proc/self/x"), "cannot create the output folder")


def test_convert_refuses_a_nul_in_the_output_name_first(tiny_pair, tmp_path, no_reading):
    with refused() as err:
        convert(tiny_pair[1], "speculators", f"{tmp_path}/a\x00b")
    assert isinstance(err.value, ConvertError) and "NUL" in str(err.value)


def test_convert_says_a_failed_write_and_leaves_nothing(tiny_pair, tmp_path, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("draftsmith.convert.run.save_safetensors", full)
    res = run("convert", tiny_pair[1], "--to", "speculators", tmp_path / "o")
    user_error(res, f"cannot write into {tmp_path / 'o'}: No space left on device")
    assert not (tmp_path / "o").exists()


def test_convert_refuses_a_huge_layout_name_with_a_short_message(tiny_pair, tmp_path):
    res = run("convert", tiny_pair[1], "--to", "x" * 100_000, tmp_path / "o")
    user_error(res, "unknown layout 'xxx", code=2)   # a bad option value (OptionError)
    assert len(res.stderr) < 1000 and not (tmp_path / "o").exists()


# --- 2. a source or target path the file system refuses (ENAMETOOLONG, a NUL) ---------------------------------------

def test_inspect_and_convert_say_a_source_path_too_long(tmp_path):
    user_error(run("inspect", tmp_path / LONG), "cannot be read")
    user_error(run("convert", tmp_path / LONG, "--to", "speculators", tmp_path / "o"), "cannot be read")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("option", ["--target", "--draft"])
def test_generate_says_a_checkpoint_path_too_long(tmp_path, option):
    user_error(run("generate", "--spec", "demo", option, tmp_path / LONG, "--no-compare"),
               f"{option[2:]} checkpoint folder")
    user_error(run("generate", "--spec", "demo", option, tmp_path / LONG, "--no-compare"), "cannot be read")


def test_checkpoint_folders_with_a_nul_are_refused(tmp_path):
    from draftsmith.assembler.folders import checkpoint_dir
    from draftsmith.convert.inspect import inspect_checkpoint
    from draftsmith.specs.loader import load_spec

    with refused() as err:
        checkpoint_dir(load_spec("demo"), f"{tmp_path}/a\x00b", "draft")
    assert "draft checkpoint folder" in str(err.value) and "cannot be read" in str(err.value)
    with refused() as err:
        inspect_checkpoint(f"{tmp_path}/a\x00b")
    assert "cannot be read" in str(err.value)


# --- 3. the config fields convert computes with -------------------------------------------------------------------

@pytest.mark.parametrize("changes, drop, says", [
    ({"num_attention_heads": 0}, ["head_dim"], "num_attention_heads is 0"),
    ({"num_attention_heads": "4"}, ["head_dim"], "num_attention_heads is '4'"),
    ({"head_dim": "x"}, [], "head_dim is 'x'"),
    ({}, ["hidden_size", "head_dim"], "states no hidden_size"),
    ({"hidden_size": 17}, ["head_dim"], "hidden_size (17) is not a multiple of num_attention_heads"),
])
def test_convert_refuses_config_fields_it_cannot_compute_with(tiny_pair, tmp_path, changes, drop, says):
    src = edit_config(copy_folder(tiny_pair[1], tmp_path / "d"), drop=drop, **changes)
    for to in ("speculators", "mistral"):   # inspect refuses them first, naming the file
        user_error(run("convert", src, "--to", to, tmp_path / "o"), f"{src / 'config.json'}: {says}")
        assert not (tmp_path / "o").exists()


def test_convert_refuses_a_list_norm_output_naming_the_config(tiny_pair, tmp_path):
    """A list where a flag belongs: the style table reads it as no value, and convert refuses it naming the file
    (as a load does: bool() read it as true), before anything is written."""
    from draftsmith.assembler.styles import STYLES, to_facts

    assert "norm_output" not in to_facts({"norm_output": [1], "hidden_size": 8}, STYLES["hf"])
    assert to_facts({"norm_output": True}, STYLES["hf"])["norm_output"] == "head"
    src = edit_config(copy_folder(tiny_pair[1], tmp_path / "d"), norm_output=[1])
    res = run("convert", src, "--to", "speculators", tmp_path / "o")
    assert res.exit_code == 1, res.output
    assert f"error: {src / 'config.json'}: norm_output is [1]; true or false is expected" in res.output
    assert not (tmp_path / "o").exists()


# --- 4. doctor --probe @FILE: a regular file of bounded size, refused before it is opened --------------------------

@pytest.fixture
def nothing_runs(monkeypatch):
    monkeypatch.setattr("draftsmith.doctor.diagnose", lambda *a, **k: pytest.fail("ran the readings"))
    monkeypatch.setattr("draftsmith.hub.target_folder", lambda *a, **k: pytest.fail("looked up the target"))


def doctor_probe(tmp_path, probe: str):
    for folder in ("t", "d"):   # checkpoint folders: doctor says a missing one (or its config) before the probe's
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "config.json").write_text("{}")
    res = run("doctor", tmp_path / "t", tmp_path / "d", "--spec", "eagle3-llama", "--probe", probe)
    assert res.exit_code == 2, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output
    return res.stderr


def test_doctor_refuses_a_fifo_probe_without_opening_it(tmp_path, nothing_runs):
    fifo, done = make_fifo(tmp_path / "probe"), threading.Event()

    def unblock():   # a reader that opened the FIFO anyway gets end-of-file here, never a hang
        while not done.is_set():
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:   # no reader waiting
                time.sleep(0.05)

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        said = doctor_probe(tmp_path, f"@{fifo}")
    finally:
        done.set()
        thread.join()
    assert "is a FIFO" in said, said


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_doctor_refuses_a_device_probe(tmp_path, nothing_runs):
    said = doctor_probe(tmp_path, "@/dev/null")   # /dev/zero alike, which would be read until memory runs out
    assert "not a regular file" in said, said


def test_doctor_refuses_a_probe_file_over_the_limit(tmp_path, nothing_runs):
    (tmp_path / "big.txt").write_bytes(b"x" * (limits.PROBE_BYTES + 1))
    said = doctor_probe(tmp_path, f"@{tmp_path / 'big.txt'}")
    assert f"at most {limits.PROBE_BYTES}" in said and len(said) < 1000, said


def test_doctor_bounds_a_long_probe_file_name(tmp_path, nothing_runs):
    said = doctor_probe(tmp_path, "@" + "p" * 100_000)
    assert "cannot read the file" in said and len(said) < 1000, said
