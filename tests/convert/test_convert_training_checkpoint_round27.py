"""A training checkpoint saved mid-run stays one when converted: its weights' metadata (the step and the run's steps)
is carried, so a load of the result is told, as a load of the source is; convert wrote only {'format': 'pt'}, and
the converted half-trained draft loaded as a finished one (a new user's walk-through, round 27)."""
import logging

import pytest
from safetensors import safe_open
from safetensors.torch import load_file

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.explain import TRAIN_STEP, TRAIN_STEPS, training_note
from draftsmith.convert.run import convert
from draftsmith.testing import write_eagle3, write_target


@pytest.mark.parametrize("step, said", [(3, True), (10, False)])
def test_a_checkpoint_saved_mid_run_converts_as_one(tmp_path, caplog, step, said):
    write_target(tmp_path / "t")
    write_eagle3(tmp_path / "d", tmp_path / "t")
    file = tmp_path / "d" / "model.safetensors"
    save_safetensors(load_file(str(file)), tmp_path / "d", metadata={TRAIN_STEP: str(step), TRAIN_STEPS: "10"})
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        convert(tmp_path / "d", "speculators", tmp_path / "out")
    with safe_open(str(tmp_path / "out" / "model.safetensors"), framework="pt") as f:
        meta = f.metadata()
    assert (meta.get(TRAIN_STEP), meta.get(TRAIN_STEPS)) == (("3", "10") if said else (None, None))
    note = training_note([tmp_path / "out" / "model.safetensors"])
    assert (note is not None) == said and (not said or "saved at step 3 of 10" in note)
    notes = [r.getMessage() for r in caplog.records if "training checkpoint" in r.getMessage()]
    assert len(notes) == said and (not said or notes[0].endswith("; the converted draft says so too"))
