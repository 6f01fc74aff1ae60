"""`draftsmith train`'s own wiring: the options' defaults as the help lists them, a bad --threads reported with the
other problems (exit 2, before the target is fetched), --stdlib's held-out text being the standard library's test
folders, the --target option passed on as typed (``./smollm2`` a folder, never the cached name), and errors and
log lines printed verbatim (a ``[...]`` in a path or a log line is not taken for console markup)."""
import shutil

import pytest
import typer
from typer.testing import CliRunner

from draftsmith.cli import app


def train(*args):
    return CliRunner().invoke(app, ["train", *map(str, args)])


@pytest.fixture
def good(tiny, tmp_path):
    """A command line that trains on the tiny target and data."""
    return ["--out", tmp_path / "out", "--target", tiny / "target", "--steps", 2, "--batch", 2, "--seq", 48,
            "--draft-vocab", 96, "--max-windows", 4, "--eval-prompts", 0, "--data", tiny / "data"]


@pytest.fixture
def jobs(monkeypatch):
    """The jobs handed to the pipeline, which does not run; the cached target is never fetched."""
    import draftsmith.train
    from draftsmith import hub

    found = []
    monkeypatch.setattr(hub, "resolve", lambda *a, **k: pytest.fail("fetched a cached target"))
    monkeypatch.setattr(draftsmith.train, "run", lambda job, **kw: found.append(job) or {})
    return found


def test_the_options_defaults():
    params = {p.name: p.default for p in typer.main.get_command(app).commands["train"].params}
    assert params == {
        "out_dir": None, "spec": "eagle3-llama", "target": None, "data": None, "held_out": None, "stdlib": False,
        "steps": 1000, "batch": 4, "seq": 512, "lr": 0.001, "ttt": 3, "draft_vocab": 12288, "max_windows": None,
        "features": None, "from_draft": None, "self_distill": 0, "prompts_per_doc": 1, "distill_batch": 16,
        "labels": "soft", "freeze_head": False, "bf16": True, "init": "target", "save_every": 100, "minutes": 0.0,
        "eval_prompts": 8, "eval_only": False, "chat": False, "seed": 0, "device": "cpu", "threads": 1}


def test_a_bad_thread_count_is_an_option_error_before_the_target_is_fetched(good, jobs):
    res = train(*good, "--threads", 0)
    assert res.exit_code == 2, res.output
    assert "--threads is 0" in res.output and "Traceback" not in res.output, res.output
    assert jobs == []


def test_a_bad_thread_count_is_reported_with_the_other_problems(good, jobs):
    res = train(*good, "--threads", 0, "--batch", 0)
    assert res.exit_code == 2, res.output
    assert "--threads is 0" in res.output and "--batch" in res.output, res.output


def test_stdlib_adds_its_test_folders_to_the_held_out_text(good, tiny, jobs):
    from draftsmith.train import data as D

    assert train(*good, "--stdlib", "--eval", tiny / "data" / "heapq.py").exit_code == 0
    assert jobs[0].held_out == [tiny / "data" / "heapq.py", *D.stdlib_files(held_out=True)]
    assert jobs[0].held_out[1:] != D.stdlib_files()


def test_a_dot_slash_target_is_the_folder_not_the_cached_name(good, tiny, tmp_path, monkeypatch, jobs):
    shutil.copytree(tiny / "target", tmp_path / "smollm2")
    monkeypatch.chdir(tmp_path)
    at = good.index("--target") + 1
    res = train(*good[:at], "./smollm2", *good[at + 1:])
    assert res.exit_code == 0, res.output
    assert jobs[0].target.resolve() == (tmp_path / "smollm2").resolve()


def test_an_error_naming_a_bracketed_path_prints_it_verbatim(good, tmp_path, jobs):
    res = train(*good, "--data", tmp_path / "[red]gone")
    assert res.exit_code == 2, res.output
    assert "[red]gone" in res.output.replace("\n", ""), res.output


def test_log_lines_are_printed_verbatim(good, monkeypatch):
    import draftsmith.train

    monkeypatch.setattr(draftsmith.train, "run", lambda job, log, **kw: log("[bold]step[/bold] 1/2 [x]") or {})
    res = train(*good)
    assert res.exit_code == 0, res.output
    assert "[bold]step[/bold] 1/2 [x]" in res.output, res.output
