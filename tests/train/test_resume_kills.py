"""A resumed run's record, at its edges (mutation run 2026-11-25): a spec changed under its own name is named as
changed, a renamed one without taps it did not change, a setting one record does not state is not compared, the
spec digest ignores key order and keeps the recipe trainer.pt files were written with, a target not fetched is not
fingerprinted, a trainer.pt holding objects is not unpickled, and paths in the messages are cut past 300 chars."""
import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

import draftsmith
from draftsmith.train import TrainConfig
from draftsmith.train.loop import STATE
from draftsmith.train.resume import resume_problems, run_changes, run_record, saved_state, spec_digest

TAPS = [2, 4, 5]


def fake_job(out, **kw):
    return SimpleNamespace(**{"out": out, "features": None, "target": None, "data": [], "seq": 48, "self_distill": 0,
                              "prompts_per_doc": 1, "eval_only": False, "chat": False, "config": TrainConfig(),
                              **kw})


def raw():
    return yaml.safe_load(open(draftsmith.load_spec("eagle3-llama").source))


def spec_with(**changes):
    """eagle3-llama as parsed from its YAML, with top-level keys replaced."""
    return draftsmith.parse_spec({**raw(), **changes})


def test_a_spec_changed_under_its_own_name_is_named_as_changed(tmp_path):
    """Same name and taps, another fusion setting: refused, and said to have changed since."""
    job, base = fake_job(tmp_path), spec_with()
    draft = raw()["draft"]
    changed = spec_with(draft={**draft, "fusion": {**draft["fusion"], "norm_before_residual": True}})
    assert run_changes(run_record(job, base, TAPS), run_record(job, changed, TAPS), tmp_path) == [
        ("spec", "eagle3-llama", "eagle3-llama (its draft, weights or quant section changed since)",
         "eagle3-llama as it was when the run started")]   # the same name, changed since: giving it again won't do


def test_a_renamed_spec_that_shapes_the_same_draft_resumes(tmp_path):
    """A spec file's name: alone shapes no draft (spec_digest leaves it out): it was refused, and the refusal told to
    give the old name, which --spec finds only for a built-in (a new user's walk-through, round 27)."""
    job = fake_job(tmp_path)
    old, now = run_record(job, spec_with(), TAPS), run_record(job, spec_with(name="outs"), TAPS)
    assert run_changes(old, now, tmp_path) == []


def test_another_spec_is_refused_naming_the_file_the_run_was_started_with(tmp_path, monkeypatch):
    """A spec read from a file is given again as that file (its absolute path: the run may be resumed from another
    folder), not as its name:, which --spec does not find."""
    first = tmp_path / "rs.yaml"
    first.write_text("name: my-spec\nextends: eagle3-llama\n")
    draft = raw()["draft"]
    changed = spec_with(name="my-spec", draft={**draft, "fusion": {**draft["fusion"], "norm_before_residual": True}})
    monkeypatch.chdir(tmp_path)   # given relative, as on a command line
    old = run_record(fake_job(tmp_path, spec="rs.yaml"), draftsmith.load_spec(first), TAPS)
    found = run_changes(old, run_record(fake_job(tmp_path), changed, TAPS), tmp_path)
    assert found == [("spec", "my-spec", "my-spec (its draft, weights or quant section changed since)",
                      str(first.resolve()))]


def test_a_setting_one_record_does_not_state_is_not_compared(tmp_path):
    """Taps not told and a target not fetched when the run started (None): nothing to compare them with."""
    job = fake_job(tmp_path)
    old = {**run_record(job, spec_with(), None), "target": None}
    now = {**run_record(job, spec_with(), TAPS), "target": {"config": "abc", "weights": {}, "hidden_size": 64}}
    assert run_changes(old, now, tmp_path) == []


def test_the_spec_digest_ignores_key_order_and_keeps_its_recipe():
    """A spec file with its keys written in another order trains the same draft (component params keep the file's
    order in a dump); the digest is the one trainer.pt files already hold (16 hex chars of a sorted dump)."""
    def backwards(d):
        return {k: backwards(v) for k, v in reversed(d.items())} if isinstance(d, dict) else d

    spec = spec_with()
    reordered = draftsmith.parse_spec(backwards(raw()))
    assert spec_digest(reordered) == spec_digest(spec)
    dump = spec.model_dump(mode="json")
    text = json.dumps({k: dump[k] for k in ("draft", "weights", "quant")}, sort_keys=True)
    assert spec_digest(spec) == hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("target", [None, "some-org/some-model"])
def test_a_target_not_on_disk_is_recorded_without_a_fingerprint(tmp_path, monkeypatch, target):
    monkeypatch.chdir(tmp_path)
    record = run_record(fake_job(tmp_path, target=target), None, None)
    assert record["target"] is None and record["target_folder"] == target


def test_a_trainer_state_holding_objects_is_not_unpickled(tmp_path):
    """trainer.pt is read with weights_only: an archive holding arbitrary objects is no trainer state."""
    torch.save({"config": {"steps": 2}, "run": None, "extra": SimpleNamespace(a=1)}, tmp_path / STATE)
    assert saved_state(tmp_path) is None
    torch.save({"config": {"steps": 2}, "run": None}, tmp_path / STATE)
    assert saved_state(tmp_path) == {"config": {"steps": 2}, "run": None, "step": None}
    torch.save({"config": {"steps": 2}, "run": None, "step": 7}, tmp_path / STATE)
    assert saved_state(tmp_path)["step"] == 7


def test_changed_data_is_listed_unquoted(tmp_path):
    old, now = {"data": ["/old/a.py"]}, {"data": ["/new/b.py"]}
    assert run_changes(old, now, tmp_path) == [("data", "/new/b.py", "/old/a.py", "/old/a.py")]


def shown(path: str) -> str:
    """A path as the messages show it: whole up to 300 characters, else cut in the middle to 299."""
    return path if len(path) <= 300 else path[:148] + "..." + path[-148:]


def path_of(base: Path, n: int) -> Path:
    """A path under ``base`` exactly ``n`` characters long (parts under the 255-character name limit)."""
    pad = n - len(str(base)) - 2
    return base / ("a" * (pad // 2)) / ("b" * (pad - pad // 2))


@pytest.mark.parametrize("n", [300, 301])
def test_paths_in_the_record_changes_are_cut_past_300_characters(tmp_path, n):
    feats, target = ("/" + c * (n - 1) for c in "fg"), ("/" + c * (n - 1) for c in "tu")
    old_f, now_f = feats
    old_t, now_t = target
    old = {"features": old_f, "target": {"config": "1"}, "target_folder": old_t}
    now = {"features": now_f, "target": {"config": "2"}, "target_folder": now_t}
    (_, f_new, f_was, _), (_, t_new, t_was, t_give) = run_changes(old, now, tmp_path)
    assert (f_new, f_was) == (shown(now_f), shown(old_f))
    assert t_new == shown(now_t) and t_was.endswith(f"({shown(old_t)})") and t_give.endswith(f"({shown(old_t)})")


@pytest.mark.parametrize("n", [300, 301])
def test_the_out_folder_in_a_refusal_is_cut_past_300_characters(tmp_path, n):
    out = path_of(tmp_path, n)
    assert len(str(out)) == n
    out.mkdir(parents=True)
    torch.save({"config": {**asdict(TrainConfig()), "lr": 0.5}, "run": None}, out / STATE)
    ((field, text),) = resume_problems(fake_job(out))
    assert field == "lr" and f"the run in {shown(str(out))} was started with 0.5" in text
    assert f"(--from-draft {shown(str(out))} starts one from its draft)" in text


def test_a_record_without_a_digest_compares_the_spec_by_name(tmp_path):
    """Records older than spec_digest: the spec's name decides (resume.same_spec's fallback)."""
    from draftsmith.train.resume import same_spec

    job = fake_job(tmp_path)
    old = {k: v for k, v in run_record(job, spec_with(), TAPS).items() if k != "spec_digest"}
    assert same_spec(old, spec_with()) and not same_spec(old, spec_with(name="outs"))
    assert run_changes(old, run_record(job, spec_with(name="outs"), TAPS), tmp_path)[0][:3] == (
        "spec", "outs", "eagle3-llama")
