"""A run against a vision-language target whose text model's keys are under ``text_config`` only (the Hub's
Qwen3-VL config.json: no top-level ``vocab_size`` or ``num_hidden_layers``) starts and trains as against any
target: the fresh draft's vocabulary and taps are the text model's (it failed with KeyError: 'vocab_size')."""
import json

import torch

from draftsmith.testing import write_byte_tokenizer
from draftsmith.testing.vl import write_vl_target
from draftsmith.train.loop import STATE
from draftsmith.train.pipeline import run


def test_a_run_against_a_qwen3_vl_target_starts_and_trains(job, tmp_path):
    target = write_vl_target(tmp_path / "t", "qwen3_vl", layout="language_model", num_hidden_layers=8,
                             vocab_size=258)
    write_byte_tokenizer(target)
    raw = json.loads((target / "config.json").read_text())
    assert "vocab_size" not in raw and raw["text_config"]["vocab_size"] == 258
    out, lines = tmp_path / "d", []
    run(job(out, target=target, draft_vocab=64, config={"steps": 2}), log=lines.append)
    assert any(line.startswith("draft vocabulary: the 64 most frequent target tokens") for line in lines)
    state = torch.load(out / STATE, weights_only=True)
    assert state["step"] == 2 and state["draft"]["t2d"].numel() == 258
    assert json.loads((out / "config.json").read_text())["vocab_size"] == 258
