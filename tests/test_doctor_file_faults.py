"""doctor stops at a file fault: a pair whose files cannot be read (NaN weights, a missing shard) fails every reading
alike, and each reading is a whole load (the base's 88 tensors read 8 times here, 16 GB each at 8B); a failure
that depends on the reading (tensors a reading expects, a d2t convention) is still searched (found by a
dogfooding helper)."""
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.doctor import diagnose, file_fault
from draftsmith.errors import CheckpointError, CheckpointNotFound, SpecError
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.assembler.vocab import VocabMapError
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.registry.registry import UnknownComponent
from draftsmith.testing import edit_config, write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=8,
             vocab_size=300)


def test_which_failures_are_file_faults():
    assert file_fault(CheckpointError("x", "NaN or inf values in 'w'")) and file_fault(CheckpointNotFound("gone"))
    assert not any(file_fault(e) for e in (CheckpointMismatch(["missing: 'w'"], where="x", spec="s"),
                                           VocabMapError("d2t"), SpecError("s", []), RuntimeError("bug")))


def test_a_draft_with_nan_weights_is_not_searched(tmp_path):
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target)
    stored = load_file(str(draft / "model.safetensors"))
    stored["midlayer.mlp.up_proj.weight"] = torch.full_like(stored["midlayer.mlp.up_proj.weight"], float("nan"))
    save_file(stored, str(draft / "model.safetensors"))
    dx = diagnose("eagle3-llama", target, draft, search=True, probes=[[1, 2, 3, 4]], max_new_tokens=8)
    assert dx.base.measure is None and dx.base.fault and dx.candidates == []
    res = CliRunner().invoke(app, ["doctor", str(target), str(draft), "--spec", "eagle3-llama", "--search"])
    assert res.exit_code == 2 and "the other readings were not tried: a file fault fails every reading alike" in \
        res.stderr, res.output


def test_a_target_draftsmith_refuses_is_not_searched(tmp_path):
    """The MXFP4 gpt-oss checkpoint (or a type no target is registered for) fails every reading of the draft alike:
    said once, not as a table of readings that 'do not load either' (found by a dogfooding helper)."""
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target)
    mxfp4 = edit_config(target, tmp_path / "mxfp4", quantization_config={"quant_method": "mxfp4"})
    unknown = edit_config(target, tmp_path / "olmoe", model_type="olmoe")
    assert file_fault(UnsupportedTarget("config.json: gpt_oss target: ...")) and file_fault(
        UnknownComponent("target", "olmoe", []))
    assert not file_fault(UnknownComponent("attention", "nope", []))
    for folder in (mxfp4, unknown):
        dx = diagnose("eagle3-llama", folder, draft, search=True, probes=[[1, 2, 3, 4]], max_new_tokens=8)
        assert dx.base.measure is None and dx.base.fault and dx.candidates == [], folder
    res = CliRunner().invoke(app, ["doctor", str(mxfp4), str(draft), "--spec", "eagle3-llama"])
    assert res.exit_code == 2 and "quant_method='mxfp4'" in res.stderr and "other readings were not tried" in \
        res.stderr and "draft.fusion" not in res.output, res.output
