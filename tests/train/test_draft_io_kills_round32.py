"""draft_io (round 32 mutation run): export_draft keeps a training checkpoint's progress (step, steps) in the
weights' metadata as given, so that a load reads the step it stopped at and the run's length, not one for the
other."""
import torch
from safetensors import safe_open

from draftsmith.assembler.explain import TRAIN_STEP, TRAIN_STEPS, training_progress
from draftsmith.train.draft_io import export_draft, init_draft


def test_export_states_the_step_and_the_steps_each_in_its_own_key(tiny, tmp_path):
    source = tmp_path / "d"
    model = init_draft("eagle3-llama", tiny / "target", source, torch.arange(0, 258, 3), seed=1)
    out = export_draft(model, tmp_path / "out", dtype=torch.float32, source=source, progress=(3, 10))
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        meta = f.metadata()
    assert (meta[TRAIN_STEP], meta[TRAIN_STEPS]) == ("3", "10")
    assert training_progress([out / "model.safetensors"]) == (3, 10)
