"""A spec whose checkpoint folders are missing: one error names both, each with the spec field and the path as its
file wrote it (relative to the file); a folder given explicitly is named as given (found by a dogfooding helper:
the target's alone was said, without the field)."""
import pytest

import draftsmith
from draftsmith.errors import CheckpointNotFound


def test_both_missing_folders_of_a_spec_are_said_with_their_fields(tmp_path):
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "rel.yaml"
    spec.write_text("name: rel\ncheckpoints: {target: ../target-folder, draft: drafts/mine}\n"
                    "draft:\n  fusion: {kind: eagle3, norm_before_residual: false}\n")
    with pytest.raises(CheckpointNotFound) as info:
        draftsmith.assemble(spec)
    target, draft = str(info.value).splitlines()
    assert target.endswith("(the spec's checkpoints.target: '../target-folder', relative to its file) does not "
                           "exist") and target.startswith("target checkpoint folder '")
    assert draft == (f"  draft checkpoint folder '{tmp_path / 'specs' / 'drafts' / 'mine'}' (the spec's "
                     "checkpoints.draft: 'drafts/mine', relative to its file) does not exist")
    with pytest.raises(CheckpointNotFound) as info:   # given: as given, and only the one missing
        draftsmith.assemble("demo", target=tmp_path / "nothing")
    assert str(info.value) == f"target checkpoint folder {str(tmp_path / 'nothing')!r} does not exist"


def test_a_folder_name_with_a_newline_is_escaped_once(tmp_path):
    """short_text writes a newline as \\n, as inspect's message shows it; quoting that text with repr doubled its
    backslash (found by a README audit)."""
    with pytest.raises(CheckpointNotFound) as info:
        draftsmith.assemble("demo", draft=tmp_path / "no\nsuch")
    assert str(info.value) == f"draft checkpoint folder '{tmp_path}/no\\nsuch' does not exist"


def test_the_second_missing_folder_is_an_indented_line(tmp_path):
    from typer.testing import CliRunner

    from draftsmith.cli import app

    res = CliRunner().invoke(app, ["generate", "--spec", "demo", "--target", str(tmp_path / "t"), "--draft",
                                   str(tmp_path / "d"), "--token-ids", "1,2"])
    assert res.exit_code == 1
    assert res.output.splitlines() == [f"error: target checkpoint folder '{tmp_path / 't'}' does not exist",
                                       f"  draft checkpoint folder '{tmp_path / 'd'}' does not exist"]
