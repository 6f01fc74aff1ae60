"""A fresh draft has the structure its spec declares (layers, aux ids, fusion norms), so every spec train can make
trains and loads back; a spec it cannot make (MLA, MTP, FP8) is refused up front, naming what train makes; and a
start that fails leaves --out as it found it, so the next run is not refused."""
import json

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.specs.loader import load_spec
from draftsmith.train import pipeline
from draftsmith.train.pipeline import run


def variant(tmp_path, name, **swap):
    """eagle3-llama with its YAML text swapped as asked, as a file."""
    text = open(load_spec("eagle3-llama").source).read().replace("name: eagle3-llama", f"name: {name}")
    for old, new in swap.items():
        assert old in text, old
        text = text.replace(old, new)
    (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path / f"{name}.yaml"


SPECS = {
    "eagle3.1-llama": lambda tmp: "eagle3.1-llama",                          # fc.aux_norm per aux state
    "eagle3-norm-before-fc": lambda tmp: "eagle3-norm-before-fc",            # fc.input_norm
    "2 layers": lambda tmp: variant(tmp, "two", **{"num_layers: auto": "num_layers: 2"}),
    "2 aux ids": lambda tmp: variant(tmp, "ids2", **{"aux_layers: {at: input}": "aux_layers: {ids: [1, 6]}"}),
    "4 aux ids": lambda tmp: variant(tmp, "ids4", **{"aux_layers: {at: input}": "aux_layers: {ids: [1, 3, 5, 7]}"}),
}


@pytest.mark.parametrize("name", SPECS)
def test_a_fresh_draft_has_the_specs_structure_and_trains(job, tiny, tmp_path, name, caplog):
    spec, out = SPECS[name](tmp_path), tmp_path / "out"
    run(job(out, spec=spec, max_windows=4, config={"steps": 1}))
    caplog.clear()   # the fresh start's own load notes what its first config did not state
    with caplog.at_level("WARNING", logger="draftsmith"):
        model = draftsmith.assemble(spec, target=tiny / "target", draft=out)
    assert "stated by neither" not in caplog.text   # the exported config states the flags it was trained with
    taps = tuple(json.loads((out / "features" / "features.json").read_text())["taps"])
    assert model.draft.taps == taps
    params = dict(model.draft.named_parameters())
    if name == "eagle3.1-llama":
        assert all(params[f"fc.aux_norm.{i}.weight"].shape == (64,) for i in range(3))
    if name == "eagle3-norm-before-fc":
        assert "fc.input_norm.weight" in params
    if name == "2 layers":
        assert len(model.draft.layers) == 2
    if name.endswith("aux ids"):
        assert len(taps) == int(name[0]) and params["fc.weight"].shape[1] == 64 * len(taps)


@pytest.mark.parametrize(("spec", "says"), [("eagle-mla-deepseek", "attention kind 'mla'"),
                                            ("deepseek-mtp", "fusion kind 'mtp'"),
                                            ("eagle1-llama-fp8", "quant method 'fp8'")])
def test_a_spec_train_cannot_make_is_refused_up_front(tiny, tmp_path, spec, says):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["train", "--out", str(out), "--target", str(tiny / "target"), "--data",
                                   str(tiny / "data"), "--spec", spec, "--seq", "48", "--steps", "1"])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert f"--spec {spec}: train cannot make a fresh draft with {says}" in text, text
    assert "; it makes EAGLE-3 (llama layers" in text and "internal error" not in text
    assert not out.exists()


def test_aux_ids_outside_the_target_are_refused_up_front(tiny, tmp_path):
    spec = variant(tmp_path, "deep", **{"aux_layers: {at: input}": "aux_layers: {ids: [2, 40]}"})
    res = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "out"), "--target", str(tiny / "target"),
                                   "--data", str(tiny / "data"), "--spec", str(spec), "--seq", "48"])
    assert res.exit_code == 2 and "--spec deep does not fit the target" in res.output, res.output
    assert "outside the target's 8 layers" in res.output and not (tmp_path / "out").exists()


def test_a_failed_start_removes_what_it_wrote(job, tmp_path, monkeypatch):
    from unittest.mock import Mock

    fail = Mock(side_effect=RuntimeError("failed"))
    out = tmp_path / "out"
    (out / "features").mkdir(parents=True)            # a features folder there before is kept
    with monkeypatch.context() as m:
        m.setattr(pipeline, "save_start", fail)       # after the draft was written to out
        with pytest.raises(RuntimeError, match="failed"):
            run(job(out))
    assert [p.name for p in out.iterdir()] == ["features"]
    with monkeypatch.context() as m:
        m.setattr(pipeline, "save_start", fail)
        with pytest.raises(RuntimeError, match="failed"):
            run(job(tmp_path / "new"))
    assert not (tmp_path / "new").exists()
    run(job(out, config={"steps": 1}))                # the same command again is not refused
