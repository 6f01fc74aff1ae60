"""A resumed run keeps the settings it was started with: only --steps, --minutes and --save-every may change;
any other change is named with its old and new value before anything runs, and trainer.pt is left as it was."""
import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.train.checks import TrainError
from draftsmith.train.loop import STATE
from draftsmith.train.pipeline import run


@pytest.fixture
def started(job, tmp_path):
    out = tmp_path / "out"
    run(job(out, config={"steps": 2}))
    return out


def test_changed_hyperparameters_are_each_named_with_old_and_new(job, started):
    before = (started / STATE).read_bytes()
    with pytest.raises(TrainError) as e:
        run(job(started, config={"steps": 4, "batch": 3, "lr": 1e-3, "labels": "hard", "ttt": 2, "seed": 7}))
    text = str(e.value)
    for field, new, old in (("batch", "3", "2"), ("lr", "0.001", "0.003"), ("labels", "'hard'", "'soft'"),
                            ("ttt", "2", "3"), ("seed", "7", "0")):
        assert f"{field} {new}: the run in {started} was started with {old}, and a resumed run keeps its " \
               "settings (only --steps, --minutes, --save-every may change)" in text, text
    assert "steps" not in [p[0] for p in e.value.problems]
    assert (started / STATE).read_bytes() == before


def test_a_changed_freeze_head_is_named_on_the_command_line(tiny, started):
    res = CliRunner().invoke(app, ["train", "--out", str(started), "--target", str(tiny / "target"), "--data",
                                   str(tiny / "data"), "--steps", "4", "--batch", "2", "--lr", "3e-3",
                                   "--save-every", "4", "--seq", "48", "--draft-vocab", "96", "--max-windows",
                                   "24", "--eval-prompts", "0", "--freeze-head"])
    assert res.exit_code == 2, res.output
    assert "--freeze-head True: the run in" in res.output and "was started with False" in " ".join(res.output.split())


def test_steps_minutes_and_save_every_may_change(job, started):
    run(job(started, config={"steps": 3, "minutes": 5, "save_every": 1}))


def test_init_may_differ_on_resume_since_only_a_fresh_draft_reads_it(job, started):
    run(job(started, config={"steps": 3, "init": "random"}))   # the draft exists: --init changes nothing
