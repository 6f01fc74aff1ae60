"""A draft config's tap ids, aux count or fusion flags that no fusion can read are said naming the config file, with
its sizes: they were said as a problem of the spec's file ("eagle3-llama.yaml has 1 problem", a file the user never
wrote), and inspect named no file at all (a README audit, 2026-11-30)."""
import json

import pytest
from typer.testing import CliRunner

from draftsmith.assembler.config_values import fusion_value_problems
from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("taps")
    target = write_target(root / "t", num_hidden_layers=8)
    return target, write_eagle3(root / "d", target)


def with_config(draft, tmp_path, **edits):
    import shutil

    out = tmp_path / "d"
    shutil.copytree(draft, out)
    config = json.loads((out / "config.json").read_text())
    for key, value in edits.items():
        if key.startswith("eagle_config__"):
            config.setdefault("eagle_config", {})[key.removeprefix("eagle_config__")] = value
        else:
            config[key] = value
    (out / "config.json").write_text(json.dumps(config))
    return out


@pytest.mark.parametrize("edits, said", [
    ({"eagle_config__eagle_aux_hidden_state_layer_ids": [2.7, 4, 5]},
     "eagle_config.eagle_aux_hidden_state_layer_ids is [2.7, 4, 5]; a list of at most"),
    ({"eagle_aux_hidden_state_layer_ids": "2,4,5"}, "eagle_aux_hidden_state_layer_ids is '2,4,5'; a list of"),
    ({"num_aux_hidden_states": 2.0}, "num_aux_hidden_states is 2.0; an integer in 1.."),
    # a flag as the string "false" was read by bool(): true, silently (a bad-input hunt, 2026-12-01)
    ({"norm_before_residual": "false"}, "norm_before_residual is 'false'; true or false is expected"),
    ({"eagle_config__norm_output": "false"}, "eagle_config.norm_output is 'false'; true or false is expected"),
])
@pytest.mark.parametrize("verb", ["generate", "inspect"])
def test_a_bad_tap_value_names_the_config_file(pair, tmp_path, edits, said, verb):
    draft = with_config(pair[1], tmp_path, **edits)
    args = ([verb, str(draft)] if verb == "inspect" else
            [verb, "--spec", "eagle3-llama", "--target", str(pair[0]), "--draft", str(draft), "--token-ids", "1,2"])
    res = CliRunner().invoke(app, args, env={"COLUMNS": "1000"})
    assert res.exit_code == 1, res.output
    assert f"error: {draft / 'config.json'}: {said}" in res.output, res.output
    assert ".yaml" not in res.output and "draft fusion" not in res.output, res.output


def test_fusion_value_problems_read_only_what_a_fusion_reads():
    assert fusion_value_problems({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]},
                                  "target_layer_ids": []}) == []
    assert fusion_value_problems({"eagle_aux_hidden_state_layer_ids": None, "num_aux_hidden_states": 3}) == []
    # eagle_config's ids are read; a top-level value beside them is not (a review: it was refused)
    assert fusion_value_problems({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]},
                                  "target_layer_ids": "2,4,5"}) == []
    assert fusion_value_problems({"eagle_config": {"num_aux_hidden_states": 3}, "num_aux_hidden_states": 3.0}) == []
    assert fusion_value_problems({"target_layer_ids": [True], "eagle_config": {"num_aux_hidden_states": -1}}) == [
        "target_layer_ids is [True]; a list of at most 1025 integers (layer indices) is expected",
        "eagle_config.num_aux_hidden_states is -1; an integer in 1..1025 is expected"]
    # each flag where the fusion reads it (eagle_config's wins) and only when present; a bool is fine
    assert fusion_value_problems({"fc_norm": 1, "norm_before_fc": None, "layernorms": False,
                                  "eagle_config": {"norm_output": True}, "norm_output": "x"}) == [
        "fc_norm is 1; true or false is expected"]
    assert fusion_value_problems({"fusion_bias": "true", "eagle_config": {"norm_before_residual": 0}}) == [
        "eagle_config.norm_before_residual is 0; true or false is expected",
        "fusion_bias is 'true'; true or false is expected"]


def test_a_target_config_is_not_checked_for_taps(pair, tmp_path):
    """Only a draft's config is read for taps: a target's stray key is no one's (a review: it was refused)."""
    import shutil

    import draftsmith

    target = tmp_path / "t"
    shutil.copytree(pair[0], target)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "num_aux_hidden_states": 2.5}))
    draftsmith.assemble("eagle3-llama", target=target, draft=pair[1])
