"""``draftsmith doctor`` on the trained demo pair: with one ambiguous setting flipped in a copy of the demo spec,
doctor names the flipped field's original value as the fix."""
import re
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

import draftsmith
from draftsmith import default_registry
from draftsmith.cli import app
from draftsmith.doctor import AMBIGUITIES, PROBES, diagnose
from draftsmith.specs.edits import changed_spec, field_info, spec_data, with_change, yaml_snippet
from draftsmith.specs.resolve import dig

DEMO = Path(draftsmith.__file__).parent / "demo_data"
# the demo pair as the recorded behaviour knows it (the builtin demo spec may move to another pair)
SPEC = {
    "name": "demo-doctor",
    "checkpoints": {"target": str(DEMO / "target"), "draft": str(DEMO / "draft")},
    "draft": {"layer": {"kind": "llama"}, "attention": {"kind": "gqa", "rope": "neox"},
              "norms": {"input": "all", "final": True},
              "fusion": {"kind": "eagle3", "norm_before_residual": False, "fc_norm": False, "norm_before_fc": False,
                         "norm_output": "head", "aux_layers": {"ids": [2, 4, 5], "at": "input"}},
              "share": {"embed": "target", "lm_head": "draft"}},
    "weights": {"rules": [{"match": r"^midlayer\.", "replace": "layers.0."}]},
    "decoding": {"topk": 4, "steps": 5, "draft_tokens": 8, "page_size": 1, "mode": "auto"},
}


@pytest.fixture(scope="module")
def registry():
    return default_registry()


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("doctor") / "demo-doctor.yaml"
    path.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    return path


def flipped(tmp_path, path: str, value) -> Path:
    out = tmp_path / "flipped.yaml"
    out.write_text(yaml.safe_dump(with_change(SPEC, path, value), sort_keys=False))
    return out


def test_readings_come_from_the_models_that_check_them(registry):
    """Values are discovered from the spec schema and the named component's params (Literal values, booleans),
    never ``auto``; a field the spec's components lack is not applicable."""
    values = {a.path: field_info(SPEC, a.path, registry) for a in AMBIGUITIES}
    assert values["draft.fusion.aux_layers.at"].values == ("input", "output")
    assert values["draft.attention.rope"].values == ("neox", "interleaved")
    assert values["draft.feed_back"].values == ("pre_norm", "post_norm")
    assert values["draft.fusion.norm_output"].values == ("none", "head", "feed_back")
    assert values["draft.vocab.d2t"].values == ("offset", "absolute")
    for flag in ("norm_before_residual", "fc_norm", "norm_before_fc"):
        assert values[f"draft.fusion.{flag}"].values == (False, True)
    # unstated readings: a plain field falls back to its default, an auto-capable one is read from the config
    assert values["draft.feed_back"].default == "pre_norm"
    assert values["draft.fusion.fc_norm"].default is None and values["draft.fusion.fc_norm"].declared is False
    eagle1 = with_change(SPEC, "draft.fusion", {"kind": "eagle1"})
    assert field_info(eagle1, "draft.fusion.aux_layers.at", registry) is None
    assert field_info(eagle1, "draft.fusion.fc_norm", registry) is None
    assert field_info(SPEC, "draft.no_such_field", registry) is None


def test_a_change_is_validated_like_a_spec_file(registry, spec_file):
    spec = draftsmith.load_spec(spec_file)
    auto = changed_spec(spec, [("draft.fusion.aux_layers", "auto")], registry)
    out = changed_spec(auto, [("draft.fusion.aux_layers.at", "output")], registry)   # "auto" becomes a mapping
    assert dig(spec_data(out), "draft.fusion.aux_layers") == {"at": "output"}
    assert out.source == spec.source
    with pytest.raises(draftsmith.SpecError):
        changed_spec(spec, [("draft.attention.rope", "sideways")], registry)
    assert yaml.safe_load(yaml_snippet([("draft.attention.rope", "neox")])) == {"draft": {"attention": {"rope":
                                                                                                        "neox"}}}


def test_healthy_pair_is_not_searched(spec_file):
    torch.set_num_threads(1)
    dx = diagnose(spec_file)
    assert not dx.low and dx.base.tau > 3.5 and dx.candidates == [] and dx.fix is None
    assert len(dx.base.measure.per_position) == SPEC["decoding"]["steps"]
    assert dx.base.measure.per_position == sorted(dx.base.measure.per_position, reverse=True)


# (path, flipped value, the right value): each flip lowers the demo pair's acceptance on 32 tokens of the argparse
# probe (the one of the two default probes that tells all of them apart, at half the time of both), or stops it
# loading (the demo checkpoint has no fc.aux_norm / fc.input_norm tensors and its d2t holds offsets), and doctor must
# name the right value. Not here: norm_output: none, which this small pair accepts exactly as well as head (its final
# norm does not move the argmax on the probe), so there is nothing for doctor to find.
FLIPS = [
    ("draft.attention.rope", "interleaved", "neox"),
    ("draft.feed_back", "post_norm", "pre_norm"),                     # unstated in SPEC: the default
    ("draft.fusion.norm_before_residual", True, False),
    ("draft.fusion.norm_output", "feed_back", "head"),                # ties with none; head is the declared default
    ("draft.fusion.fc_norm", True, False),
    ("draft.fusion.norm_before_fc", True, False),
    ("draft.vocab.d2t", "absolute", "offset"),
]


@pytest.mark.parametrize("path,value,right", FLIPS, ids=[f"{p.rsplit('.', 1)[1]}={v}" for p, v, _ in FLIPS])
def test_doctor_names_the_flipped_setting(tmp_path, path, value, right):
    torch.set_num_threads(1)
    dx = diagnose(flipped(tmp_path, path, value), search=True, probes=[PROBES[1]])
    assert dx.fix is not None, [(c.describe(), c.tau, c.error) for c in dx.candidates]
    assert dx.fix.changes == ((path, right),)
    assert dx.candidates[0] is dx.fix
    assert dx.fix.tau > 3.5


def test_doctor_names_aux_layers_read_as_outputs(tmp_path):
    """The subtle one on this pair: adjacent layers' states are alike, so taps one layer late cost acceptance only
    on the argparse probe after 48 tokens (tau 4.20 vs 3.71 at 64 tokens)."""
    torch.set_num_threads(1)
    dx = diagnose(flipped(tmp_path, "draft.fusion.aux_layers.at", "output"), search=True, max_new_tokens=64,
                  probes=[PROBES[1]])
    assert dx.fix is not None and dx.fix.changes == (("draft.fusion.aux_layers.at", "input"),)


def test_cli_prints_the_fix(tmp_path):
    run = lambda spec: CliRunner().invoke(app, ["doctor", str(DEMO / "target"), str(DEMO / "draft"),  # noqa: E731
                                                "--spec", str(spec)])
    res = run(flipped(tmp_path, "draft.fusion.fc_norm", True))
    assert res.exit_code == 1, res.output
    assert "does not load" in res.output and "fc.aux_norm" in res.output
    assert "draft.fusion.fc_norm = false" in res.output and "fc_norm: false" in res.output   # the YAML to paste
    ok = run(flipped(tmp_path, "draft.fusion.fc_norm", False))
    assert ok.exit_code == 0 and "acceptance is fine" in ok.output, ok.output
    assert "the other readings were not tried: --search tries them" in ok.output, ok.output   # fine is not "best"


def test_cli_says_whether_the_other_readings_were_tried_on_a_fine_pair():
    res = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--search"])
    assert res.exit_code == 0 and "acceptance is fine" in res.output, res.output
    assert re.search(r"no other reading does better \(\d+ tried\)", res.output), res.output
    assert "were not tried" not in res.output


def test_a_low_bar_missed_by_the_right_reading_blames_the_draft_not_the_spec(monkeypatch):
    """The shipped demo pair under a bar no draft meets, with no reading that does better (the toy draft's loss
    favours norm_output none; that fix is dropped here): doctor says the spec reads the draft as well as any
    reading, not that the draft may be for another target."""
    import draftsmith.doctor as doctor

    real = doctor.diagnose

    def without_fix(*args, **kwargs):
        dx = real(*args, **kwargs)
        dx.fix = None
        return dx

    monkeypatch.setattr(doctor, "diagnose", without_fix)
    res = CliRunner().invoke(app, ["doctor", str(DEMO / "target"), str(DEMO / "draft"), "--spec", "demo",
                                   "--min-tau", "100"])
    assert res.exit_code == 1, res.output
    assert "acceptance is low" in res.output and "no reading tried does better" in res.output
    assert "reads this draft as well as any reading tried" in " ".join(res.output.split())


def _cand(tau, loss, changes=(("x", 1),), declared=False):
    from draftsmith.doctor import Candidate, Measure

    return Candidate(changes, Measure(tau, [], 1, loss), declared=declared)


def test_next_best_by_tau_then_by_draft_loss():
    from draftsmith.doctor import next_best

    base = _cand(1.5, 2.0, changes=())
    by_tau, by_loss = _cand(1.8, 2.5), _cand(1.5, 1.6, (("y", 2),))
    by_loss.measure.per_position = [0.4, 0.1]   # it drafted other tokens than base somewhere: a real difference
    assert next_best([by_loss, by_tau], base) is by_tau             # a clear tau gain decides first
    assert next_best([by_loss, _cand(1.55, 1.95)], base) is by_loss  # else a clearly lower loss at a tau no lower
    assert next_best([_cand(1.45, 1.0)], base) is None               # a lower loss at a lower tau is no fix
    assert next_best([_cand(1.5, 1.85)], base) is None               # 7.5%: within what a probe tells apart
    assert next_best([_cand(1.5, None)], base) is None
    rescaled = _cand(1.5, 1.6, (("z", 3),))   # accepts exactly as base does at every position: the lower loss may
    assert next_best([rescaled], base) is None  # be the logits' scale alone (a norm dropped before the head)


def test_the_draft_loss_is_lowest_for_the_right_reading(tmp_path):
    """On the toy pair the teacher-forced loss ranks the spec as trained first against each flipped reading."""
    from draftsmith.doctor import measure

    torch.set_num_threads(1)
    right = measure(draftsmith.assemble(draftsmith.load_spec(flipped(tmp_path, "draft.attention.rope", "neox"))),
                    [PROBES[1]], 16)
    for path, value in (("draft.attention.rope", "interleaved"), ("draft.fusion.norm_before_residual", True)):
        wrong = measure(draftsmith.assemble(draftsmith.load_spec(flipped(tmp_path, path, value))), [PROBES[1]], 16)
        assert right.loss is not None and wrong.loss is not None
        assert right.loss < wrong.loss - 0.1, (path, right.loss, wrong.loss)
