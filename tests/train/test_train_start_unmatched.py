"""A fresh draft's start from the target's last layer names the draft weights it leaves at their fresh start: a
mixture-of-experts or latent-attention last layer has no namesake for a Llama draft's MLP or attention, and train
said only "start: 3 draft weights" (the README promised "one more target layer over the deepest tap"; the log line
itself: tests/train/test_pipeline_kills_round13.py)."""
from __future__ import annotations

from types import SimpleNamespace

from torch import nn

from draftsmith.train.draft_io import start_from_target, unmatched_by_target


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
    left = unmatched_by_target(model)
    assert start_from_target(model) == ["layers.0.q_proj.weight"]
    assert left == ["layers.0.down_proj.weight", "layers.0.extra.weight"] == unmatched_by_target(model)
