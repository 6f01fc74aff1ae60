"""A target whose tensors do not fit does not hide the draft's problems: its config stands, so the draft is
checked against it in the same run and the error's note says what that found, or that the draft fits (found by a
dogfooding helper: the draft's misfit was said only once the target was fixed)."""
import pytest
import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.testing import write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=8,
             vocab_size=32)


def reshaped(folder, name, shape):
    stored = load_file(str(folder / "model.safetensors"))
    stored[name] = torch.zeros(shape)
    save_file(stored, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("draft_too", [False, True])
def test_the_draft_is_checked_beside_a_target_that_does_not_fit(tmp_path, draft_too):
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target)
    reshaped(target, "model.layers.2.mlp.up_proj.weight", (7, 16))
    if draft_too:
        reshaped(draft, "midlayer.self_attn.q_proj.weight", (16, 7))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert str(info.value).startswith(f"{target} does not fit spec 'target (llama)': 1 problem")
    (note,) = info.value.__notes__
    if draft_too:
        assert note.startswith(f"note: the draft was checked too: {draft} does not fit spec 'eagle3-llama': 1 "
                               "problem\n  wrong shape: 'layers.0.self_attn.q_proj.weight' is [16, 7]"), note
    else:
        assert note == "note: the draft was checked too: it fits"


@pytest.mark.parametrize("fault", ["cut short", "shard missing"])
def test_the_draft_is_checked_beside_a_target_whose_weight_files_are_broken(tmp_path, fault):
    """A weight file cut short or a shard missing leaves the config standing too (the draft's misfit was said only
    once the target's files were fixed: a hunting helper); a config that is the fault stands for nothing."""
    import json

    from draftsmith.errors import CheckpointError, CheckpointNotFound

    target = write_target(tmp_path / "t", **SMALL)
    draft = reshaped(write_eagle3(tmp_path / "d", target), "midlayer.self_attn.q_proj.weight", (16, 7))
    weights = target / "model.safetensors"
    if fault == "cut short":
        weights.write_bytes(weights.read_bytes()[:-100])
    else:
        (target / "model.safetensors.index.json").write_text(json.dumps(
            {"weight_map": {n: "model-00002-of-00002.safetensors" for n in load_file(str(weights))}}))
        weights.unlink()
    with pytest.raises((CheckpointError, CheckpointNotFound)) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert ("cut short" if fault == "cut short" else "model-00002-of-00002.safetensors") in str(info.value)
    (note,) = info.value.__notes__
    assert note.startswith(f"note: the draft was checked too: {draft} does not fit spec 'eagle3-llama': 1 problem\n"
                           "  wrong shape: 'layers.0.self_attn.q_proj.weight' is [16, 7]"), note
    config = json.loads((target / "config.json").read_text())
    del config["hidden_size"]   # the config itself (transformers would take its default): raised alone
    (target / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert "hidden_size" in str(info.value) and not getattr(info.value, "__notes__", None)
