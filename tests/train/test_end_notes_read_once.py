"""The notes a finished run logs about the draft it wrote read its config.json once (a review, h96: unstated read it,
its call of output_ids_note read it again, and the run's own output_ids_note a third time), and say what they said
when each read its own."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

import draftsmith
from draftsmith.components.eagle3_config import KEY
from draftsmith.train import pipeline
from draftsmith.train.export_notes import canonical_kept, output_ids_note, unstated

EAGLE31_NAMES = ("fc.weight", "layers.0.hidden_norm.weight", "fc_norm.0.weight", "fc_norm.1.weight",
                 "fc_norm.2.weight", "norm.weight", "lm_head.weight")


@pytest.mark.parametrize("ids", [None, [1, 3, 5]])
def test_the_end_notes_read_the_draft_s_config_once(tmp_path, monkeypatch, ids):
    # a fed-back norm (unstated's note, which asks output_ids_note) and taps read as layer outputs (output_ids_note's)
    save_file({n: torch.ones(2) for n in EAGLE31_NAMES}, str(tmp_path / "model.safetensors"))
    eagle = {"use_last_layernorm": True, **({KEY: ids} if ids else {})}
    (tmp_path / "config.json").write_text(json.dumps({"eagle_config": eagle}))
    (tmp_path / "s.yaml").write_text("name: s\nextends: eagle3-llama\ndraft:\n  fusion: {aux_layers: {at: output}}\n")
    model = SimpleNamespace(draft=SimpleNamespace(fc=SimpleNamespace(norm_output="feed_back"), taps=(2, 4, 6)),
                            spec=draftsmith.load_spec(tmp_path / "s.yaml"))
    each = [n for n in (unstated(model, tmp_path, "s"), output_ids_note(model, tmp_path, "s"),
                        canonical_kept(model, tmp_path)) if n]
    reads, real = [], Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda p, *a, **k: (reads.append(p) if p.name == "config.json" else None)
                        or real(p, *a, **k))
    assert pipeline.end_notes(model, tmp_path, "s") == each and len(each) == (2 if ids else 1)
    assert reads == [tmp_path / "config.json"]


def test_the_end_notes_read_the_draft_s_tensor_header_once(tmp_path, monkeypatch):
    # unstated and canonical_kept each listed the written draft's tensors (its safetensors header): read once (h112)
    from draftsmith.train import export_notes

    save_file({n: torch.ones(2) for n in EAGLE31_NAMES}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"eagle_config": {"use_last_layernorm": True}}))
    model = SimpleNamespace(draft=SimpleNamespace(fc=SimpleNamespace(norm_output="feed_back"), taps=(2, 4, 6)),
                            spec=draftsmith.load_spec("eagle3-llama"))
    each = [n for n in (unstated(model, tmp_path, "s"), canonical_kept(model, tmp_path)) if n]
    reads, real = [], export_notes.list_tensors
    monkeypatch.setattr(export_notes, "list_tensors", lambda folder: reads.append(folder) or real(folder))
    assert pipeline.end_notes(model, tmp_path, "s") == each and each
    assert reads == [tmp_path], reads
