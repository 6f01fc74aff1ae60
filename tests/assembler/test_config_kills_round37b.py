"""Mutation round 37 (config.read_target_config): a model_type transformers knows is read by AutoConfig alone; only a
type it has no class for asks the registered target records for a ``config_as`` reading."""
import pytest

from draftsmith.assembler import config
from draftsmith.testing import write_target


def test_a_type_transformers_knows_never_asks_the_target_records(tmp_path, monkeypatch):
    import draftsmith.components.targets as targets

    folder = write_target(tmp_path / "t")
    monkeypatch.setattr(targets, "target_record", lambda *a, **k: pytest.fail("the records were asked"))
    assert config.read_target_config(folder).model_type == "llama"
