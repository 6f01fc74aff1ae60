"""doctor does not try, for a field the spec leaves to the draft config, the reading that config already gives
(a row identical to the spec as given, at the cost of a whole load: 16 GB again at 8B); it tries the others."""
import json
import shutil
from pathlib import Path

import pytest
import yaml

import draftsmith
from draftsmith import default_registry
from draftsmith.specs.edits import current_value, field_info, with_change

DEMO = Path(draftsmith.__file__).parent / "demo_data"
FLAGS = ("fc_norm", "norm_before_fc", "norm_output")


def demo_spec(draft: Path) -> dict:
    """The demo spec with the three config-first fusion flags left unstated (norm_before_residual is required)."""
    spec = yaml.safe_load((Path(draftsmith.__file__).parent / "specs" / "builtin" / "demo.yaml").read_text())
    spec["name"] = "demo-unstated"
    spec["checkpoints"] = {"target": str(DEMO / "target"), "draft": str(draft)}
    fusion = spec["draft"]["fusion"]
    for flag in FLAGS:
        fusion.pop(flag, None)
    fusion["norm_before_residual"] = False
    return spec


def draft_with(tmp_path: Path, **config) -> Path:
    out = tmp_path / "draft"
    shutil.copytree(DEMO / "draft", out)
    cfg = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**cfg, **config}))
    return out


@pytest.mark.parametrize("config,in_use", [
    ({}, {"fc_norm": False, "norm_before_fc": False, "norm_output": "head"}),      # the defaults
    ({"fc_norm": True, "norm_output": False}, {"fc_norm": True, "norm_before_fc": False, "norm_output": "none"}),
])
def test_field_info_reads_the_value_in_use_from_the_draft_config(tmp_path, config, in_use):
    registry = default_registry()
    draft = draft_with(tmp_path, **config)
    spec = demo_spec(draft)
    raw = json.loads((draft / "config.json").read_text())
    for flag, value in in_use.items():
        info = field_info(spec, f"draft.fusion.{flag}", registry, None, raw)
        assert info.default == value, flag
        assert field_info(spec, f"draft.fusion.{flag}", registry).default is None   # no config: unknown
    # a stated value is the spec's, and `auto` reads the config as an unstated one does
    stated = with_change(spec, "draft.fusion.fc_norm", "auto")
    info = field_info(stated, "draft.fusion.fc_norm", registry, None, raw)
    assert current_value(stated, "draft.fusion.fc_norm", info) == in_use["fc_norm"]
    flipped = with_change(spec, "draft.fusion.fc_norm", not in_use["fc_norm"])
    assert current_value(flipped, "draft.fusion.fc_norm", info) == (not in_use["fc_norm"])


def test_doctor_tries_only_the_readings_not_in_use(tmp_path, monkeypatch):
    import draftsmith.doctor as doctor

    draft = draft_with(tmp_path, fc_norm=False, norm_output=True)   # SpecForge's norm_output: head
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(demo_spec(draft)))
    tried = []

    def fake(spec, changes, *args, **kwargs):
        tried.append(tuple(changes))
        return doctor.Candidate(tuple(changes), doctor.Measure(1.0, [0.0], 1, None))

    monkeypatch.setattr(doctor, "run_candidate", fake)
    doctor.diagnose(path, search=True, rounds=1)
    changed = {c[-1] for c in tried if c}
    assert ("draft.fusion.fc_norm", True) in changed and ("draft.fusion.fc_norm", False) not in changed
    assert ("draft.fusion.norm_before_fc", True) in changed and ("draft.fusion.norm_before_fc", False) not in changed
    assert {("draft.fusion.norm_output", "none"), ("draft.fusion.norm_output", "feed_back")} <= changed
    assert ("draft.fusion.norm_output", "head") not in changed


def test_a_reading_that_breaks_the_spec_is_not_placed_on_the_users_file(tmp_path):
    """norm_before_fc: true tried beside the file's fc_norm: true: the problem is the reading's, and the file's
    fusion line (which holds no such problem) is not named."""
    from draftsmith.doctor import run_candidate

    spec = demo_spec(DEMO / "draft")
    spec["draft"]["fusion"]["fc_norm"] = True
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    registry = default_registry()
    loaded = draftsmith.load_spec(path, registry)
    cand = run_candidate(loaded, [("draft.fusion.norm_before_fc", True)], DEMO / "target", DEMO / "draft",
                         ["x"], 8, registry)
    assert "exclusive" in cand.detail and str(path) not in cand.detail and "(line" not in cand.detail
    assert cand.error.startswith("the spec read this way has 1 problem")   # no class name: the message says it


def test_threads_auto_times_the_spec_as_given_once(monkeypatch):
    """--threads auto: the counts are timed on the first model assembled (the spec as given) and kept for every
    reading; the choice is said on stderr."""
    import draftsmith.doctor as doctor
    import draftsmith.threads as threads
    import torch
    from typer.testing import CliRunner

    from draftsmith.cli import app

    tunes, real = [], doctor.run_candidate

    def recording(spec, changes, *args, **kwargs):
        tunes.append(args[5] if len(args) > 5 else kwargs.get("tune"))
        return real(spec, changes, *args, **kwargs)

    monkeypatch.setattr(doctor, "run_candidate", recording)
    monkeypatch.setattr(threads, "counts", lambda cpus=None: [1, 2])
    before = torch.get_num_threads()
    try:
        res = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--threads", "auto", "--search",
                                       "--max-new-tokens", "8"])
    finally:
        torch.set_num_threads(before)
    assert res.exit_code == 0, res.output
    assert len(tunes) > 1 and tunes[0] is not None and tunes[1:] == [None] * (len(tunes) - 1)
    assert "--threads auto: the fastest of a chain of 8 tokens timed at each count" in " ".join(res.output.split())


def test_threads_auto_times_the_chain_doctor_measures(monkeypatch):
    """Timed on what measure() runs (a greedy chain of the spec's steps, stop tokens off), not the spec's tree."""
    from types import SimpleNamespace

    import draftsmith.threads as threads
    from draftsmith.cli.doctor import _auto_threads

    calls = []

    class Model:
        spec = SimpleNamespace(decoding=SimpleNamespace(steps=5))

        def generate(self, prompt, **kw):
            calls.append((prompt, kw))

    monkeypatch.setattr(threads, "auto_threads", lambda run, device: (run(), threads.ThreadChoice(1, {}))[1])
    _auto_threads([1, 2, 3], "cpu")(Model())
    assert calls == [([1, 2, 3], dict(max_new_tokens=8, stop=[], topk=1, steps=5))]


def test_a_readings_spec_problem_keeps_the_loads_notes():
    from draftsmith.doctor import unplaced
    from draftsmith.errors import Problem, SpecError

    e = SpecError("spec.yaml", [Problem("draft.fusion", "exclusive", line=3)])
    e.add_note("note: is the draft made for this target?")
    out = unplaced(e)
    assert out.__notes__ == ["note: is the draft made for this target?"] and "(line" not in str(out)
