"""A model's config.json given as a spec or as a spec's base is said so in one problem (a spec-perturbation hunt:
every key was an unknown field, 26 problems and 5.7 KB, among them "architectures ... Did you mean
'checkpoints'?")."""
import json

import pytest

import draftsmith
from draftsmith.errors import SpecError
from draftsmith.testing import write_target


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("cfg") / "t") / "config.json"


def test_a_config_json_as_the_spec(config):
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(config)
    (p,) = info.value.problems
    assert p.message.startswith("the document is a model's config (model_type, ") and p.message.endswith(
        ", not a spec") and "draftsmith inspect FOLDER" in p.hint


def test_a_config_json_as_a_base(config, tmp_path):
    (tmp_path / "mine.yaml").write_text(f"extends: {json.dumps(str(config))}\nname: mine\n")
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(tmp_path / "mine.yaml")
    (p,) = info.value.problems
    assert p.path == "extends" and f"the base {config} is a model's config (" in p.message


def test_a_spec_holding_a_model_key_too_is_still_judged_field_by_field(tmp_path):
    (tmp_path / "s.yaml").write_text("extends: demo\nname: s\nmodel_type: llama\n")
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(tmp_path / "s.yaml")
    assert [p.path for p in info.value.problems] == ["model_type"]
