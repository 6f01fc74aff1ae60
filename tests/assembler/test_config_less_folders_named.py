"""A folder without config.json / params.json is said naming which folder it is, both at once, wherever the folders
are checked: plan_assembly() (validate's check of a spec's checkpoints) and doctor's diagnose() as assemble() and the
command line say it (`target: X: no config.json ...`); validate and doctor said only the target's, unnamed (doctor's
found in mutation round 31)."""
import pytest

from draftsmith.assembler.assemble import plan_assembly
from draftsmith.doctor import diagnose
from draftsmith.errors import CheckpointNotFound

SAID = "no config.json or params.json (a checkpoint folder needs a config + weights)"


@pytest.mark.parametrize("check", [plan_assembly, diagnose], ids=["plan_assembly", "diagnose"])
def test_both_folders_without_a_config_are_said_each_named(tmp_path, check):
    (tmp_path / "t").mkdir()
    (tmp_path / "d").mkdir()
    with pytest.raises(CheckpointNotFound) as e:
        check("eagle3-llama", tmp_path / "t", tmp_path / "d")
    assert str(e.value) == f"target: {tmp_path / 't'}: {SAID}\n  draft: {tmp_path / 'd'}: {SAID}"
