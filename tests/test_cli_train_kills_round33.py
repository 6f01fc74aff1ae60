"""Mutation round 33 (cli.train.checked_job): a bad --threads is said with the other options' problems when no path
is empty (it was reported only beside an empty path's refusal in the tests), and nothing is written."""
from typer.testing import CliRunner

from draftsmith.cli import app


def test_bad_threads_is_said_with_a_bad_number_and_a_missing_target(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.txt").write_text("some text\n")
    res = CliRunner().invoke(app, ["train", "--spec", "demo", "--target", str(tmp_path / "nowhere"), "--data", "x.txt",
                                   "--out", "o", "--threads", "0", "--lr", "-1"])
    assert res.exit_code == 2, res.output
    assert "--threads" in res.output and "--lr" in res.output and "nowhere" in res.output, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"]
