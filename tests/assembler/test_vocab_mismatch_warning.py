"""A draft made for another vocabulary that still loads (its spec shares the target's embedding and head, so it
computes on the target's ids) is told so at load, naming both sizes; a draft made for this target is not."""
import logging

import pytest

import draftsmith
from draftsmith.testing import write_eagle1, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=4)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab")
    target = write_target(root / "t", vocab_size=96, **SMALL)
    other = write_target(root / "o", vocab_size=48, **SMALL)
    return target, write_eagle1(root / "own", target), write_eagle1(root / "other", other)


def load_warnings(caplog, target, draft) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model = draftsmith.assemble("eagle1-llama", target=target, draft=draft, dtype="float32")
    out = model.generate([[1, 2, 3]], max_new_tokens=6)   # it loads and decodes: the target's output either way
    assert out[0].token_ids == model.generate_baseline([[1, 2, 3]], max_new_tokens=6)[0].token_ids
    return [r.getMessage() for r in caplog.records if "vocab_size" in r.getMessage()]


def test_a_draft_for_another_vocabulary_is_told_at_load(folders, caplog):
    target, _, other = folders
    (said,) = load_warnings(caplog, target, other)
    assert f"draft {other}: its config.json says vocab_size 48, the target's is 96: is the draft made" in said


def test_a_draft_for_this_vocabulary_is_not(folders, caplog):
    target, own, _ = folders
    assert load_warnings(caplog, target, own) == []
