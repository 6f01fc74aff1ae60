"""A bad-input hunt over the CLI's options: bench --scale's --batches had no upper bound (99999999 was an internal
error, torch's allocator failing on a 25 GB prompt tensor after the checkpoints were written; 100000 reached
generate_baseline()'s batch bound as exit 1 naming its `prompt` argument; 5000 digits were Python's int-string
limit, an internal error), a long --threads / --graphs / --scale value was echoed whole, and a train option past its
bound waited for the target's plan (transformers' import, 11-13 s against 3 s) though the plan is meant to run only
once every other check passed."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from draftsmith import limits
from draftsmith.cli import app


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000"})


def refused(res, *says: str) -> str:
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    for s in says:
        assert s in text, res.output
    return text


@pytest.mark.parametrize("batches, past", [(str(limits.BATCH + 1), str(limits.BATCH + 1)),
                                           ("1,99999999,99999999", "99999999")])
def test_a_batch_past_generates_bound_is_refused_before_anything_is_built(batches, past, scale_calls, tmp_path):
    text = refused(run("bench", "--scale", "tiny", "--batches", batches, "--out", tmp_path / "o"),
                   "Invalid value for --batches", f": {past} past {limits.BATCH}, the most prompts one generate() call",
                   f"give batch sizes in 1..{limits.BATCH}")
    assert text.count(f"{past} past") == 1, text   # a value given twice is said once
    assert not scale_calls and not (tmp_path / "o").exists()


def test_a_batch_of_thousands_of_digits_is_refused_and_quoted_short(scale_calls, tmp_path):
    text = refused(run("bench", "--scale", "tiny", "--batches", "9" * 5000, "--out", tmp_path / "o"),
                   "Invalid value for --batches", "...", f"give batch sizes in 1..{limits.BATCH}")
    assert len(text) < 400 and not scale_calls


def test_the_bound_itself_is_measured(scale_calls, tmp_path):
    res = run("bench", "--scale", "tiny", "--batches", f"1,{limits.BATCH}", "--out", tmp_path / "o", "--no-hf")
    assert res.exit_code == 0, res.output
    assert scale_calls[0][1]["batches"] == [1, limits.BATCH]


@pytest.mark.parametrize("args", [["generate", "--threads", "x" * 5000], ["bench", "--graphs", "x" * 5000],
                                  ["bench", "--scale", "x" * 5000]])
def test_a_long_value_is_quoted_short(args):
    text = refused(run(*args), "...")
    assert len(text) < 400, text


def test_a_train_option_past_its_bound_does_not_wait_for_the_targets_plan(monkeypatch, tmp_path):
    monkeypatch.setattr("draftsmith.train.target_checks.target_plan_problems",
                        lambda job: pytest.fail("planned the target of a run refused for its --steps"))
    monkeypatch.setattr("draftsmith.train.preflight.target_plan_problems",
                        lambda job: pytest.fail("planned the target of a run refused for its --steps"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.py").write_text("x = 1\n" * 50)
    refused(run("train", "--spec", "demo", "--data", tmp_path / "data", "--out", tmp_path / "o", "--steps", "0"),
            "--steps 0: allowed an integer >= 1")
    assert not (tmp_path / "o").exists()
