"""A spec named as a path is that file, also when a registered spec has its name: `validate ./eagle3-llama` checked
the built-in spec and said ok, while `generate --spec ./eagle3-llama` read the file (a CLI review)."""
import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app


def test_a_file_named_as_a_path_wins_over_the_registered_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eagle3-llama").write_text("name: x\n")
    with pytest.raises(draftsmith.SpecError, match="draft: required field is missing"):
        draftsmith.load_spec("./eagle3-llama")
    assert draftsmith.load_spec("eagle3-llama").name == "eagle3-llama"   # the bare name stays the registered one
    res = CliRunner().invoke(app, ["validate", "./eagle3-llama"])
    assert res.exit_code == 1 and "draft: required field is missing" in res.output, res.output
    res = CliRunner().invoke(app, ["validate", "eagle3-llama"])
    assert res.exit_code == 0 and "ok (eagle3-llama)" in res.output, res.output
