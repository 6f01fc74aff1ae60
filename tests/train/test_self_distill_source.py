"""Self-distilled features record what they were distilled from (features.json's "distill": the data's token
digest, --seed, --self-distill, --prompts-per-doc), so a run whose decode would give other windows is refused
before the draft is built and the decode runs (it was refused after both, with --out written, and the next attempt
resumed the never-trained draft); where the record is missing (an older features.json), the refusal after the decode
removes the start it wrote. --max-windows 0 trains on the features on disk alone: no decode is run for nothing."""
import json

import pytest

from draftsmith.train import pipeline
from draftsmith.train.checks import TrainError
from draftsmith.train.features import META
from draftsmith.train.loop import STATE
from draftsmith.train.pipeline import run


def quick(job, out, feats, **kw):
    return job(out, features=feats, **{"max_windows": 2, "config": {"steps": 1}, **kw})


@pytest.fixture
def feats(job, tmp_path):
    """Features self-distilled with --self-distill 4 by a 1-step run."""
    run(quick(job, tmp_path / "first", tmp_path / "feats", self_distill=4))
    return tmp_path / "feats"


def no_decode(monkeypatch):
    monkeypatch.setattr(pipeline, "self_distilled", lambda *a, **k: pytest.fail("self-distilled"))
    monkeypatch.setattr(pipeline, "start_fresh", lambda *a, **k: pytest.fail("built the draft"))


def test_the_features_record_the_self_distillation(feats):
    record = json.loads((feats / META).read_text())["distill"]
    assert {k: record[k] for k in ("seed", "new_tokens", "per_doc")} == {"seed": 0, "new_tokens": 4, "per_doc": 1}


@pytest.mark.parametrize(("change", "says"), [
    ({"self_distill": 5}, "they were self-distilled with --self-distill 4, this run has 5"),
    ({"self_distill": 4, "prompts_per_doc": 2}, "they were self-distilled with --prompts-per-doc 1, this run has 2"),
    ({"self_distill": 4, "config": {"steps": 1, "seed": 3}}, "they were self-distilled with --seed 0, this run has 3"),
])
def test_another_self_distillation_is_refused_before_the_decode(job, feats, tmp_path, monkeypatch, change, says):
    no_decode(monkeypatch)
    out = tmp_path / "second"
    with pytest.raises(TrainError) as e:
        run(quick(job, out, feats, **change))
    assert says in str(e.value) and "give a new --features folder" in str(e.value), str(e.value)
    assert not out.exists()


def test_features_made_without_self_distillation_are_refused_before_it(job, tmp_path, monkeypatch):
    run(quick(job, tmp_path / "first", tmp_path / "plain"))
    no_decode(monkeypatch)
    with pytest.raises(TrainError, match="they were made without self-distillation, this run has --self-distill 4"):
        run(quick(job, tmp_path / "second", tmp_path / "plain", self_distill=4))
    assert not (tmp_path / "second").exists()


def test_without_the_record_the_refusal_after_the_decode_leaves_no_start(job, feats, tmp_path):
    meta = json.loads((feats / META).read_text())
    del meta["distill"]   # as an older draftsmith wrote it
    (feats / META).write_text(json.dumps(meta))
    out = tmp_path / "second"
    with pytest.raises(TrainError, match="the token windows differ"):
        run(quick(job, out, feats, self_distill=5))
    assert not out.exists()   # the next run starts fresh, it does not resume an untrained start


def test_the_same_self_distillation_reuses_the_features(job, feats, tmp_path):
    run(quick(job, tmp_path / "again", feats, self_distill=4, distill_batch=2))
    assert (tmp_path / "again" / STATE).is_file()


def test_max_windows_0_runs_no_decode(job, feats, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "self_distilled", lambda *a, **k: pytest.fail("self-distilled for nothing"))
    run(quick(job, tmp_path / "zero", feats, self_distill=4, max_windows=0))
    assert (tmp_path / "zero" / STATE).is_file()
