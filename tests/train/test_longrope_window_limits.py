"""A longrope target (Phi-3.5-mini, Phi-4-mini, Phi-3-*-128k) is transformers' for original_max_position_embeddings
positions only: past them transformers (and vLLM, SGLang) rotate with the long factors, which draftsmith does not
compute. generate() refuses such a call; train refuses a window (--seq), a self-distilled continuation or a held-out
prompt that would run past them, before any work, rather than extracting features no engine computes. The refusal
of a long prompt states the prompt length that fits with the new tokens asked for."""
import json
from types import SimpleNamespace

import pytest

from draftsmith.components import rope
from draftsmith.train.target_checks import target_problems

FACTORS = {"short_factor": [1.0] * 8, "long_factor": [4.0] * 8}
STYLES = {   # how config.json states it: Phi-3.5-mini / Phi-4-mini (transformers 4), and as transformers 5 writes it
    "rope_scaling, top-level original": {"rope_scaling": {"type": "longrope", **FACTORS},
                                         "original_max_position_embeddings": 32},
    "rope_parameters": {"rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0, **FACTORS,
                                            "original_max_position_embeddings": 32}},
}


def job(target, seq, **over):
    return SimpleNamespace(**{"target": target, "seq": seq, "eval_only": False, "self_distill": 0, "held_out": [],
                              "eval_prompts": 0, "eval_prompt_tokens": 16, "eval_new_tokens": 16, "chat": False,
                              **over})


def target(tmp_path, **cfg):
    folder = tmp_path / "target"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "phi3", "max_position_embeddings": 1024, **cfg}))
    (folder / "tokenizer.json").write_text("{}")
    return folder


@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_window_past_a_longrope_targets_original_positions_is_refused(tmp_path, style):
    folder = target(tmp_path, **STYLES[style])
    assert target_problems(job(folder, 32)) == []
    (field, message), = target_problems(job(folder, 33))
    assert field == "seq" and message.startswith("33: allowed an integer up to 32, the target's positions (its "
                                                 "longrope original_max_position_embeddings in "), message
    assert "long factors" in message
    (field, message), = target_problems(job(folder, 32, held_out=["x"], eval_prompts=4, eval_new_tokens=18))
    assert field == "eval_prompts" and "run past the target's positions of 32" in message, message


def test_other_ropes_keep_the_context_as_the_limit(tmp_path):
    folder = target(tmp_path, rope_scaling=None, original_max_position_embeddings=16)   # Phi-4: no longrope
    assert target_problems(job(folder, 1024)) == []
    (field, message), = target_problems(job(folder, 1025))
    assert field == "seq" and "the target's context (max_position_embeddings in " in message


@pytest.mark.parametrize("longest, new", [(40, 2), (40, 9), (33, 32), (40, 40)])
def test_a_long_prompt_is_told_a_length_that_fits(monkeypatch, longest, new):
    monkeypatch.setattr(rope, "position_limit", lambda model, kinds=("longrope",): 32)
    message, = rope.position_problems(None, longest, new)
    room = 32 - new + 1
    if room > 0:
        assert message.endswith(f"prompts of at most {room} tokens fit with max_new_tokens {new}"), message
        assert rope.position_problems(None, room, new) == [] and rope.position_problems(None, room + 1, new)
    else:
        assert message.endswith("no prompt fits with max_new_tokens 40: after a one-token prompt, at most 32 new "
                                "tokens fit"), message
        assert rope.position_problems(None, 1, 32) == [] and rope.position_problems(None, 1, 33)
