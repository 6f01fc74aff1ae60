"""A resumed run keeps the settings it was started with: only --steps, --minutes and --save-every may change
among the hyperparameters, and the run's own settings (spec and taps, seq, data, features folder, self-distillation,
target) not at all; any other change is named with its old and new value before anything runs, and trainer.pt is
left as it was. --init and --draft-vocab may differ (only a fresh draft reads them), --max-windows too."""
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
    said = " ".join(res.output.split())   # a flag said as the command line gives it, once
    assert "--freeze-head: the run in" in said and "was started with --no-freeze-head" in said, said
    assert "give --no-freeze-head again" in said and "True" not in said


def test_steps_minutes_and_save_every_may_change(job, started):
    run(job(started, config={"steps": 3, "minutes": 5, "save_every": 1}))


def test_init_may_differ_on_resume_since_only_a_fresh_draft_reads_it(job, started):
    run(job(started, config={"steps": 3, "init": "random"}))   # the draft exists: --init changes nothing


# The run's own settings (trainer.pt's run record): spec and taps, seq, data, features folder, self-distillation,
# target. A resume with a new features folder re-extracted silently under the new ones (s6: 3 steps on taps
# [2, 4, 5], 3 more on [3, 5, 6], config.json then stating the first).

def quick(job, out, **kw):
    return job(out, max_windows=4, **{"config": {"steps": 2}, **kw})


@pytest.fixture
def small(job, tmp_path):
    out = tmp_path / "small"
    run(quick(job, out))
    return out


def refused_with(job, out, *texts, **kw):
    before = (out / STATE).read_bytes()
    with pytest.raises(TrainError) as e:
        run(quick(job, out, **{"config": {"steps": 4}, **kw}))
    for t in texts:
        assert t in str(e.value), str(e.value)
    assert (out / STATE).read_bytes() == before
    return e.value


def test_a_new_seq_and_features_folder_are_named(job, small, tmp_path):
    feats = tmp_path / "f2"
    err = refused_with(job, small, f"features {feats}: the run in {small} was started with {small / 'features'}",
                       "seq 40: the run in", "was started with 48", features=feats, seq=40)
    assert sorted(p[0] for p in err.problems) == ["features", "seq"]
    assert not feats.exists()   # refused before anything was extracted


def test_a_spec_reading_other_taps_is_named_with_them(job, small, tmp_path):
    from draftsmith.specs.loader import load_spec

    text = open(load_spec("eagle3-llama").source).read().replace("name: eagle3-llama", "name: outs")
    (tmp_path / "outs.yaml").write_text(text.replace("aux_layers: {at: input}", "aux_layers: {ids: [3, 5, 6], at: "
                                                                                "input}"))
    refused_with(job, small, f"spec outs (taps [3, 5, 6]): the run in {small} was started with eagle3-llama (taps "
                             "[2, 4, 5])", spec=tmp_path / "outs.yaml", features=tmp_path / "f3")


def test_other_data_and_self_distillation_are_named(job, tiny, small, tmp_path):
    refused_with(job, small, "data ", f"was started with {tiny / 'data'}", data=[tiny / "data" / "heapq.py"],
                 features=tmp_path / "f4")
    refused_with(job, small, "self_distill 8: the run in", "was started with 0", self_distill=8,
                 features=tmp_path / "f5")


def test_another_target_is_named_but_a_moved_one_and_a_moved_out_resume(job, tiny, small, tmp_path):
    import shutil

    from draftsmith.testing import edit_config

    other = edit_config(tiny / "target", tmp_path / "other", rms_norm_eps=1e-5)
    refused_with(job, small, f"target {other}: the run in {small} was started with a target of another config.json",
                 target=other, features=tmp_path / "f6")
    moved = shutil.copytree(tiny / "target", tmp_path / "moved")
    out = shutil.move(small, tmp_path / "out-moved")   # its features inside it move along
    run(quick(job, out, target=moved, config={"steps": 3}))


def test_a_trainer_state_without_the_record_warns_and_resumes(job, small):
    import torch

    state = torch.load(small / STATE, weights_only=True)
    del state["run"]
    torch.save(state, small / STATE)
    said = []
    run(quick(job, small, config={"steps": 3}, draft_vocab=50), log=said.append)
    line = next(m for m in said if m.startswith("resuming"))
    assert "does not record the run's settings (an older draftsmith wrote it)" in line, line
    assert "it keeps its 96-token vocabulary (--draft-vocab applies to a fresh draft only)" in line, line
    assert "run" in torch.load(small / STATE, weights_only=True)   # recorded from now on
