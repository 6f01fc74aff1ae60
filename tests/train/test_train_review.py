"""The train pipeline review (2026-11-27): what a run trains and saves, whatever the spec's decoding says, and a
state saved on one device resumed on another."""
from pathlib import Path

import torch

import draftsmith
from draftsmith.train.loop import STATE
from draftsmith.train.pipeline import run


def bf16_spec(tmp_path):
    text = Path(draftsmith.load_spec("eagle3-llama").source).read_text().replace("mode: auto}",
                                                                           "mode: auto, draft_dtype: bfloat16}")
    assert "draft_dtype: bfloat16" in text
    path = tmp_path / "bf16.yaml"
    path.write_text(text)
    return path


def test_a_bf16_draft_dtype_spec_still_trains_float32_master_weights(job, tmp_path, monkeypatch):
    # decoding.draft_dtype: bfloat16 (the shipped smollm2 spec's) made the assembled draft bf16, so AdamW kept bf16
    # weights and moments: the loss fell less, and trainer.pt held bf16
    import draftsmith.train.loop as loop
    seen = set()
    real = loop.ttt_losses
    monkeypatch.setattr(loop, "ttt_losses", lambda model, *a, **k: seen.update(
        p.dtype for p in model.draft.parameters()) or real(model, *a, **k))
    out = tmp_path / "out"
    run(job(out, spec=str(bf16_spec(tmp_path)), config={"steps": 2}), log=lambda line: None)
    assert seen == {torch.float32}
    state = torch.load(out / STATE, weights_only=True)
    floats = {t.dtype for t in state["draft"].values() if t.is_floating_point()}
    moments = {t.dtype for s in state["opt"]["state"].values() for t in s.values()
               if torch.is_tensor(t) and t.is_floating_point() and t.dim() > 0}
    assert floats == {torch.float32} and moments == {torch.float32}


def test_a_state_saved_on_another_device_resumes_here(job, tmp_path, monkeypatch):
    # trainer.pt written with --device cuda held CUDA storages, and torch.load without map_location refused it on a
    # CPU machine ("not a trainer state this draft can resume from"), where the README says --device may change
    out = tmp_path / "out"
    run(job(out, config={"steps": 2}), log=lambda line: None)
    state = torch.load(out / STATE, weights_only=True)
    real = torch.serialization.location_tag
    monkeypatch.setattr(torch.serialization, "location_tag",
                        lambda storage: "cuda:0" if storage.device.type == "cpu" else real(storage))
    torch.save(state, out / STATE)   # as saved from a CUDA device
    monkeypatch.undo()
    lines = []
    run(job(out, config={"steps": 4}), log=lines.append)
    assert any("resuming" in line for line in lines)
    assert torch.load(out / STATE, weights_only=True, map_location="cpu")["step"] == 4
