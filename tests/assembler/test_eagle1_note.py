"""The standard EAGLE-1 layout (yuhuili's: no "bias" key in config.json, fc.bias held) loads with the built-in
eagle1-llama spec without a note: the key's default is said only when the checkpoint does not fit it."""
import logging

import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.errors import DraftsmithError
from draftsmith.testing import edit_config, write_eagle1, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=4,
             vocab_size=32)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("e1note") / "t", **SMALL)


def yuhuili(folder, target):
    draft = write_eagle1(folder, target, bias=None)
    return edit_config(draft, drop=["bias"])   # as the yuhuili checkpoints: no key at all


def said(caplog):
    return [r.getMessage() for r in caplog.records if r.name.startswith("draftsmith")]


def test_the_standard_eagle1_layout_loads_without_a_bias_note(target, tmp_path, caplog):
    draft = yuhuili(tmp_path / "d", target)
    assert "fc.bias" in load_file(str(draft / "model.safetensors"))
    with caplog.at_level(logging.INFO, logger="draftsmith"):
        model = draftsmith.assemble("eagle1-llama", target=target, draft=draft)
    assert model.draft.fc.bias is not None
    assert not [m for m in said(caplog) if "bias" in m], said(caplog)


def test_without_fc_bias_the_load_note_still_names_the_field(target, tmp_path):
    draft = yuhuili(tmp_path / "d", target)
    stored = load_file(str(draft / "model.safetensors"))
    stored.pop("fc.bias")
    save_file(stored, str(draft / "model.safetensors"))
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble("eagle1-llama", target=target, draft=draft)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert 'no "bias" key, which reads as true' in notes and "state fusion.bias: false" in notes
