"""diagnose() (``draftsmith doctor --spec S`` with the spec's own folders) says a target and a draft folder without a
config file both, each named, as generate, bench and validate do: it said the target's alone, unnamed (found in
mutation round 31; checkpoint_dirs now checks the config of every folder it finds)."""
import pytest

from draftsmith.doctor import diagnose
from draftsmith.errors import CheckpointNotFound

NEEDS = "no config.json or params.json (a checkpoint folder needs a config + weights)"


def test_both_folders_without_a_config_are_said_each_named(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "d").mkdir()
    with pytest.raises(CheckpointNotFound) as e:
        diagnose("demo", tmp_path / "t", tmp_path / "d")
    assert str(e.value) == f"target: {tmp_path / 't'}: {NEEDS}\n  draft: {tmp_path / 'd'}: {NEEDS}", str(e.value)
