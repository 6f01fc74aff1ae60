"""A draft config whose vocab_size / draft_vocab_size its tensors contradict: `inspect` and a load (`generate`) say
the same line, naming the key, the config's value and the tensor's shape (inspect said only a missing d2t or nothing,
the load a misfit without the key, or only the target's vocabulary: a review, h100)."""
from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.assembler.vocab import config_contradictions
from draftsmith.cli import app
from draftsmith.errors import DraftsmithError
from draftsmith.testing import edit_config, write_eagle3, write_target

WIDE = {"COLUMNS": "300"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab")
    target = write_target(root / "target")   # a 96-token vocabulary
    return target, write_eagle3(root / "plain", target), write_eagle3(root / "reduced", target, draft_vocab=32)


def inspected(folder):
    return CliRunner().invoke(app, ["inspect", str(folder)], env=WIDE)


def test_the_contradictions_name_the_key_its_value_and_the_tensor():
    head, d2t, t2d = {"lm_head.weight": (96, 64)}, {"d2t": (32,), "lm_head.weight": (32, 64)}, {"t2d": (96,)}
    assert config_contradictions({"draft_vocab_size": 48}, head) == [
        "its config.json says draft_vocab_size 48, but its lm_head.weight is [96, 64]"]
    assert config_contradictions({"vocab_size": 200, "draft_vocab_size": 96}, head) == [
        "its config.json says vocab_size 200, but its lm_head.weight is [96, 64] and it holds no d2t"]
    assert config_contradictions({"vocab_size": 50}, d2t | t2d) == [
        "its config.json says vocab_size 50, but its t2d is [96]"]
    assert config_contradictions({"vocab_size": 96, "draft_vocab_size": 32}, d2t | t2d) == []   # a reduced head
    assert config_contradictions({"vocab_size": 96, "draft_vocab_size": 96}, head) == []


def test_a_draft_vocab_size_above_the_targets_is_said_once():
    # a load gives the target's vocabulary: a head with its rows contradicts the key, said once (h112: twice)
    above = ("its config.json's draft_vocab_size 200 is above the target's vocabulary of 96 ids: the draft's head is "
             "sized by the target's (engines size it by this key: is the draft made for this target?)")
    assert config_contradictions({"draft_vocab_size": 200}, {"lm_head.weight": (96, 64)}, 96) == [
        "its config.json says draft_vocab_size 200, but its lm_head.weight is [96, 64]"]
    assert config_contradictions({"draft_vocab_size": 200}, {"lm_head.weight": (200, 64)}, 96) == [above]
    assert config_contradictions({"draft_vocab_size": 200}, {}, 96) == [above]   # the target's head
    assert config_contradictions({"draft_vocab_size": 96}, {}, 96) == []


def test_a_draft_that_loads_is_warned_as_inspect_warns(folders, tmp_path, caplog):
    target, _, reduced = folders
    draft = edit_config(reduced, tmp_path / "d", vocab_size=50)
    line = "its config.json says vocab_size 50, but its t2d is [96]"
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert any(r.getMessage() == f"draft {draft}: {line}" for r in caplog.records), caplog.text
    res = inspected(draft)
    assert res.exit_code == 0 and f"warning: {draft}: {line}" in res.stderr, res.output
    assert f"# assumed/noticed: {line}\n" in res.stdout


def test_a_draft_that_does_not_load_is_refused_by_both_naming_the_key(folders, tmp_path):
    target, plain, _ = folders
    draft = edit_config(plain, tmp_path / "d", draft_vocab_size=48)
    line = "config.json says draft_vocab_size 48, but its lm_head.weight is [96, 64]"
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert f"note: the draft's {line}" in info.value.__notes__, info.value.__notes__
    res = inspected(draft)
    assert res.exit_code == 1 and f"error: {draft}: the proposed spec does not load this folder as it is: its {line}" \
        in res.stderr, res.output
