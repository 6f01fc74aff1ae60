"""A fresh draft's start from the target's last layer names the draft weights it leaves at their fresh start: a
mixture-of-experts or latent-attention last layer has no namesake for a Llama draft's MLP or attention, and train
said only "start: 3 draft weights" (the README promised "one more target layer over the deepest tap"; the log line
itself: tests/train/test_pipeline_notes_kills_round13.py). One walk of the draft's weights gives both lists (a
review, h96: train's start walked them twice, start_from_target then unmatched_by_target)."""
from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from draftsmith.train import draft_io, pipeline
from draftsmith.train.draft_io import start_from_target


def test_the_weights_left_at_their_start_are_the_ones_start_from_target_did_not_set():
    last = nn.Module()
    last.q_proj, last.down_proj = nn.Linear(4, 4), nn.Linear(4, 4)
    layer = nn.Module()
    layer.q_proj = nn.Linear(8, 4, bias=False)      # takes the target's (its hidden half)
    layer.down_proj = nn.Linear(4, 3, bias=False)   # other rows: kept
    layer.extra = nn.Linear(4, 4, bias=False)       # no namesake: kept
    draft = nn.Module()
    draft.layers = nn.ModuleList([layer])
    model = SimpleNamespace(target=SimpleNamespace(model=SimpleNamespace(layers=[last])), draft=draft)
    assert start_from_target(model) == (["layers.0.q_proj.weight"], ["layers.0.down_proj.weight",
                                                                     "layers.0.extra.weight"])


def test_train_s_start_walks_the_draft_s_weights_once(job, tmp_path, monkeypatch):
    walks, real = [], draft_io._namesakes
    monkeypatch.setattr(draft_io, "_namesakes", lambda model: walks.append(model) or real(model))
    lines = []
    model = pipeline.start(job(tmp_path / "a", draft_vocab=None), torch.arange(200), lines.append)
    assert walks == [model] and lines[-1].startswith("start: ") and "draft weights from the target's last" in lines[-1]
