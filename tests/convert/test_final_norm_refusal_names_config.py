"""inspect and convert refuse a draft config whose use_last_layernorm contradicts its norm_output, or a false one
beside a held norm.weight, naming the draft's config.json, as its other values' refusals name it: they said
"error: draft fusion has 1 problem", naming no file (a review, h108)."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.errors import SpecError
from draftsmith.testing import write_eagle3, write_target

CLASH = "draft config eagle_config.use_last_layernorm: says false, and the config's norm_output means head in its style"
HELD = "draft config eagle_config.use_last_layernorm: says false (no final norm: Model-Optimizer then builds none"


@pytest.mark.parametrize("eagle, said", [({"use_last_layernorm": False}, HELD),
                                         ({"use_last_layernorm": False, "norm_output": True}, CLASH)])
@pytest.mark.parametrize("verb", ["inspect", "convert"])
def test_a_final_norm_the_config_contradicts_is_said_of_its_config_file(tmp_path, eagle, said, verb):
    target = write_target(tmp_path / "t", num_hidden_layers=8)
    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": eagle})
    args = [verb, str(draft)] + (["--to", "layers", str(tmp_path / "out")] if verb == "convert" else [])
    res = CliRunner().invoke(app, args, env={"COLUMNS": "1000"})
    assert res.exit_code == 1 and not (tmp_path / "out").exists(), res.output
    assert f"error: {draft / 'config.json'} has 1 problem\n  {said}" in res.output, res.output
    assert "draft fusion" not in res.output, res.output


@pytest.mark.parametrize("eagle, said", [({"use_last_layernorm": False}, HELD),
                                         ({"use_last_layernorm": False, "norm_output": True}, CLASH)])
def test_a_load_says_it_of_the_config_file_too(tmp_path, eagle, said):
    # generate with a spec stating norm_output: auto said it as a problem of the SPEC file (h112)
    import yaml

    from draftsmith.specs.loader import load_spec

    target = write_target(tmp_path / "t", num_hidden_layers=8)
    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": eagle})
    spec = load_spec("eagle3-llama").model_dump(mode="json")
    spec["draft"]["fusion"]["norm_output"] = "auto"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    res = CliRunner().invoke(app, ["generate", "--spec", str(tmp_path / "s.yaml"), "--target", str(target),
                                   "--draft", str(draft), "--token-ids", "1,2", "--max-new-tokens", "2",
                                   "--no-compare"], env={"COLUMNS": "1000"})
    assert res.exit_code == 1, res.output
    assert f"error: {draft / 'config.json'} has 1 problem\n  {said}" in res.output, res.output
    assert "s.yaml" not in res.output, res.output


def test_a_load_says_an_unbuilt_flag_of_the_config_file(tmp_path):
    # set aside to check the tensors too, then said of the spec file, as the norm refusals were (h112)
    import draftsmith

    target = write_target(tmp_path / "t", num_hidden_layers=8)
    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": {"use_aux_hidden_state": False}})
    with pytest.raises(SpecError, match=r"eagle_config\.use_aux_hidden_state") as e:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert e.value.source == str(draft / "config.json")
    assert "the tensors were checked too" in "\n".join(getattr(e.value, "__notes__", ()))
