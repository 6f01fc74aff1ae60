"""Secondary public arguments checked as the rest of the API checks them (a Python API user's findings,
2026-11-30): a registry that is no Registry for list_specs and parse_spec, a source that is no str, and where a spec
without a file reads its relative checkpoints from."""
import pytest
import yaml

import draftsmith
from draftsmith.errors import NotFound, OptionError


@pytest.mark.parametrize("call", [lambda: draftsmith.list_specs(5),
                                  lambda: draftsmith.parse_spec({"name": "x"}, registry=5)])
def test_a_registry_that_is_no_registry_is_named(call):
    with pytest.raises(OptionError, match="registry: a draftsmith Registry .* got the int 5"):
        call()


def test_a_source_that_is_no_str_is_named():
    data = draftsmith.load_spec("demo").model_dump(mode="json")
    with pytest.raises(OptionError, match="source: a str .* got the int 5"):
        draftsmith.parse_spec(data, source=5)


def test_a_spec_without_a_file_says_its_checkpoints_are_read_from_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = draftsmith.load_spec("demo").model_dump(mode="json")
    data["checkpoints"] = {"target": "no-target", "draft": "no-draft"}
    with pytest.raises(NotFound) as e:
        draftsmith.assemble(draftsmith.parse_spec(data))
    said = " ".join(str(e.value).split())
    assert "relative to the current folder: the spec has no file" in said and "relative to its file" not in said


def test_a_spec_file_still_says_its_file(tmp_path):
    data = draftsmith.load_spec("demo").model_dump(mode="json")
    data["checkpoints"] = {"target": "no-target", "draft": "no-draft"}
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(data))
    with pytest.raises(NotFound) as e:
        draftsmith.assemble(str(spec))
    assert "relative to its file" in " ".join(str(e.value).split())
