"""A vision-language config.json holding its text model's keys both at the top and under ``text_config`` (the Hub's
Qwen2.5-VL files re-saved by transformers 4.5x) is read as transformers reads it: ``text_config`` wins (the text
model is built from it), so train sizes a fresh draft by the target's real vocabulary and layer count."""
import json

from draftsmith.assembler.config import text_keys
from draftsmith.train.draft_io import target_text_keys


def test_text_config_wins_over_the_top_level(tmp_path):
    raw = {"model_type": "qwen2_5_vl", "vocab_size": 500, "num_hidden_layers": 3,
           "text_config": {"vocab_size": 700, "num_hidden_layers": 2}}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    for keys in (text_keys(raw), target_text_keys(tmp_path)):
        assert (keys["vocab_size"], keys["num_hidden_layers"], keys["model_type"]) == (700, 2, "qwen2_5_vl")
