"""Mutation round 36 (part 3): target_checks' choice between a longrope target's original positions and its
context: where the context is no longer than the original positions, the context is the limit named."""
import json
from types import SimpleNamespace

import pytest

from draftsmith.train.target_checks import target_problems

LONGROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 8, "long_factor": [4.0] * 8,
            "original_max_position_embeddings": 32}


def job(target, seq):
    return SimpleNamespace(target=target, seq=seq, eval_only=False, self_distill=0, held_out=[], eval_prompts=0,
                           eval_prompt_tokens=16, eval_new_tokens=16, chat=False)


@pytest.mark.parametrize("context", [32, 24])
def test_a_context_within_the_original_positions_is_the_limit_named(tmp_path, context):
    folder = tmp_path / "target"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "phi3", "max_position_embeddings": context,
                                                    "rope_parameters": LONGROPE}))
    (folder / "tokenizer.json").write_text("{}")
    assert target_problems(job(folder, context)) == []
    (field, message), = target_problems(job(folder, context + 1))
    assert field == "seq" and message.startswith(f"{context + 1}: allowed an integer up to {context}, the target's "
                                                 "context (max_position_embeddings in "), message
