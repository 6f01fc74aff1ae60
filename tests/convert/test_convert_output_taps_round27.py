"""Aux ids a spec reads as layer outputs (``aux_layers.at: output``, SGLang's reading) are written as the layer inputs
they tap (the convention every layout's reader takes: vLLM, HF hidden_states[id]): convert copied them as they were,
so a draft trained with ids [1, 3, 6] at outputs (the inputs of 2, 4, 7) was read by vLLM one layer early (a new
user's walk-through of train -> convert, round 27)."""
import json

import pytest

import draftsmith
from draftsmith.convert.run import convert
from draftsmith.testing import write_eagle3, write_target


@pytest.mark.parametrize("to", ["speculators", "layers"])
def test_taps_read_as_outputs_are_written_as_the_inputs_they_tap(tmp_path, to):
    write_target(tmp_path / "t", num_hidden_layers=8)
    write_eagle3(tmp_path / "d", tmp_path / "t", aux_ids=[1, 3, 6])
    spec = tmp_path / "ao.yaml"
    spec.write_text("name: ao\nextends: eagle3-llama\ndraft:\n  fusion: {aux_layers: {at: output}}\n")
    source = draftsmith.assemble(str(spec), target=tmp_path / "t", draft=tmp_path / "d")
    assert source.draft.taps == (2, 4, 7)
    config = convert(tmp_path / "d", to, tmp_path / "out", spec=str(spec))
    ids = config.get("eagle_aux_hidden_state_layer_ids") or config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    assert ids == [2, 4, 7]
    family = "eagle3-speculators" if to == "speculators" else "eagle3-llama"
    back = draftsmith.assemble(family, target=tmp_path / "t", draft=tmp_path / "out")   # as detection reads it
    assert back.draft.taps == source.draft.taps
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == config


def test_the_result_is_said_to_load_with_the_spec_detection_proposes(tmp_path):
    """Its taps are the source's, so the detected family reads it as trained (the line named the source spec, whose
    at: output would read the written input ids one layer late)."""
    from typer.testing import CliRunner

    from draftsmith.cli import app

    write_target(tmp_path / "t", num_hidden_layers=8)
    write_eagle3(tmp_path / "d", tmp_path / "t", aux_ids=[1, 3, 6])
    (tmp_path / "ao.yaml").write_text("name: ao\nextends: eagle3-llama\ndraft:\n  fusion: {aux_layers: {at: output}}\n")
    res = CliRunner().invoke(app, ["convert", str(tmp_path / "d"), "--spec", str(tmp_path / "ao.yaml"), "--to",
                                   "speculators", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "load it with spec eagle3-speculators (or omit --spec" in res.output.splitlines()[0], res.output[:600]
