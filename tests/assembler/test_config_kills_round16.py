"""Kills of a mutation run over assembler/config.py (round 16): missing_target_keys' closing advice agrees with
the count ("Add it" for one key, "Add them" for two)."""
from draftsmith.assembler.config import missing_target_keys

SIZES = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2,
         "num_hidden_layers": 2, "vocab_size": 32}


def without(*keys):
    return {k: v for k, v in SIZES.items() if k not in keys}


def test_one_missing_key_is_it():            # kills > 1 -> >= 1
    said = missing_target_keys(without("vocab_size"), [])
    assert said.endswith("Add it as the model's own config.json states it (save_pretrained writes every key)"), said


def test_two_missing_keys_are_them():        # kills > 1 -> > 2
    said = missing_target_keys(without("vocab_size", "hidden_size"), [])
    assert said.endswith("Add them as the model's own config.json states them (save_pretrained writes every key)")
