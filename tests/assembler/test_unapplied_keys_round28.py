"""Draft config keys draftsmith does not apply are said at the load (an oracle hunt of round 28 against vLLM, SGLang
and EAGLE's reference): a ``logit_scale`` (vLLM multiplies the draft's logits by it: its tree ranks and sampled
drafts differ, the output does not) and a ``target_hidden_size`` that is not the target's hidden size (the engines
size fc by it and would not load the pair; draftsmith reads the target it is given). Both loaded silently; so did a
draft_vocab_size above the target's vocabulary (a bad-input hunt, 2026-12-01)."""
import json
import logging
import shutil

import pytest

import draftsmith
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    target = write_target(root / "t")
    return target, write_eagle3(root / "d", target)


def load_said(pair, tmp_path, caplog, **keys) -> list[str]:
    target, draft = pair
    edited = shutil.copytree(draft, tmp_path / "d")
    (edited / "config.json").write_text(json.dumps(json.loads((draft / "config.json").read_text()) | keys))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble("eagle3-llama", target=target, draft=edited)
    return [r.getMessage() for r in caplog.records if r.name == "draftsmith" and r.getMessage().startswith("draft ")]


def test_a_logit_scale_is_said_not_applied(pair, tmp_path, caplog):
    said = load_said(pair, tmp_path, caplog, logit_scale=0.25)
    assert len(said) == 1 and said[0].endswith(
        "logit_scale=0.25 is not applied: the draft's logits are its head's (vLLM scales them, so its tree ranks and "
        "sampled drafts differ; the output is the target's either way)"), said


def test_a_target_hidden_size_of_another_target_is_said(pair, tmp_path, caplog):
    width = json.loads((pair[0] / "config.json").read_text())["hidden_size"]
    said = load_said(pair, tmp_path, caplog, target_hidden_size=2 * width)
    assert len(said) == 1 and said[0].endswith(
        f"target_hidden_size={2 * width} is not the target's hidden_size {width}: the draft reads the target it is "
        "given (engines size its fc by this key: is the draft made for this target?)"), said


def test_a_draft_vocab_size_above_the_targets_vocabulary_is_said(pair, tmp_path, caplog):
    """A draft_vocab_size past the target's vocabulary reads as no reduced vocabulary: the head is sized by the
    target's (engines size it by the key and would not load the pair); it loaded with no word (a bad-input hunt,
    2026-12-01). One equal to it is the usual full-vocabulary draft: nothing said."""
    vocab = json.loads((pair[0] / "config.json").read_text())["vocab_size"]
    said = load_said(pair, tmp_path, caplog, draft_vocab_size=vocab + 1000)
    # said once, as the tensor it contradicts (vocab.config_contradictions, as inspect says it): it was said a second
    # time as above the target's vocabulary (h112)
    assert len(said) == 1 and said[0].endswith(f"its config.json says draft_vocab_size {vocab + 1000}, but its "
                                               f"lm_head.weight is [{vocab}, 64]"), said
    shutil.rmtree(tmp_path / "d")
    assert load_said(pair, tmp_path, caplog, draft_vocab_size=vocab) == []


@pytest.mark.parametrize("keys", [{"logit_scale": 1.0}, {"logit_scale": None}, {"target_hidden_size": None}, {}])
def test_keys_that_agree_or_are_unset_are_not_said(pair, tmp_path, caplog, keys):
    if "target_hidden_size" not in keys:
        keys = keys | {"target_hidden_size": json.loads((pair[0] / "config.json").read_text())["hidden_size"]}
    assert load_said(pair, tmp_path, caplog, **keys) == []
