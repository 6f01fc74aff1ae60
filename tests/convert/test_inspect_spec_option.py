"""``inspect --spec FILE``: the spec it prints names the file by its absolute path (``extends:`` with --extends)
and is named after the file's spec, so it loads wherever it is saved; a relative ``fam.yaml`` was kept as typed
(saved elsewhere: "the base spec file fam.yaml does not exist") and named ``fam.yaml-d`` (a review, 2026-12-01)."""
import yaml
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target


def test_a_spec_file_given_to_inspect_is_named_so_the_proposal_loads_anywhere(tmp_path, monkeypatch):
    target = write_target(tmp_path / "t", "llama", seed=1)
    write_eagle3(tmp_path / "d", target)
    (tmp_path / "fam.yaml").write_text("name: fam\nextends: eagle3-llama\ndecoding: {topk: 2, steps: 3, "
                                       "draft_tokens: 6}\n")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["inspect", "d", "--spec", "fam.yaml", "--extends"])
    assert res.exit_code == 0, res.output
    printed = yaml.safe_load(res.stdout)
    assert printed["extends"] == str(tmp_path / "fam.yaml") and printed["name"] == "fam-d"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "mine.yaml").write_text(res.stdout)
    monkeypatch.chdir(tmp_path / "elsewhere")
    res = CliRunner().invoke(app, ["validate", "mine.yaml"])
    assert res.exit_code == 0 and res.stdout.startswith("mine.yaml: ok (fam-d)"), res.output
