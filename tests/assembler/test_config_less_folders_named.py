"""A folder without config.json / params.json is said naming which folder it is, both at once, wherever the folders
are checked: plan_assembly() (validate's check of a spec's checkpoints) as assemble() and the command line say it
(`target: X: no config.json ...`); validate said only the target's, unnamed."""
import pytest

from draftsmith.assembler.assemble import plan_assembly
from draftsmith.errors import CheckpointNotFound

SAID = "no config.json or params.json (a checkpoint folder needs a config + weights)"


def test_plan_assembly_names_both_folders_without_a_config(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "d").mkdir()
    with pytest.raises(CheckpointNotFound) as e:
        plan_assembly("eagle3-llama", tmp_path / "t", tmp_path / "d")
    assert str(e.value) == f"target: {tmp_path / 't'}: {SAID}\n  draft: {tmp_path / 'd'}: {SAID}"
