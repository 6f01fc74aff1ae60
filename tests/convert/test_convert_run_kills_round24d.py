"""Kills for convert/run.py survivors (round 24d): convert's note on a folder that does not load with its spec as it
is shows at most 4 misfits ("and N more" after), each cut to 300 characters, and the source folder cut to 300."""
import logging

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("misfit") / "t")


def _note(folder, target, extra, caplog):
    """convert's note for an EAGLE-3 draft in ``folder`` holding the tensors ``extra`` too (each 'unexpected')."""
    draft = write_eagle3(folder, target, draft_vocab=40)
    (f,) = draft.glob("*.safetensors")
    tensors = load_file(f)
    tensors.update({name: torch.zeros(2) for name in extra})
    save_file(tensors, f, metadata={"format": "pt"})
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        CliRunner().invoke(app, ["convert", str(draft), "--to", "speculators", str(folder.parent / "out")])
    (note,) = [r.getMessage() for r in caplog.records if "does not load with spec" in r.getMessage()]
    return note


def test_five_misfits_show_four_and_one_more(tmp_path, target, caplog):
    """short_list(..., 4, ...): four misfits named, then 'and 1 more' (not five, not three and 2 more)."""
    note = _note(tmp_path / "d", target, [f"extra{i}.weight" for i in range(5)], caplog)
    assert ("(unexpected: 'extra0.weight', unexpected: 'extra1.weight', unexpected: 'extra2.weight', "
            "unexpected: 'extra3.weight' and 1 more)") in note, note


def test_a_misfit_is_said_whole_up_to_300_characters(tmp_path, target, caplog):
    """Each misfit ("unexpected: 'NAME'") is cut past 300 characters: one of 300 is whole, one of 301 is cut."""
    whole, cut = "a" * 286, "b" * 287   # "unexpected: '" + name + "'": 300 and 301 characters
    note = _note(tmp_path / "d", target, [whole, cut], caplog)
    assert f"unexpected: '{whole}'" in note, note
    assert cut not in note and "unexpected: 'bbb" in note and "..." in note, note


@pytest.mark.parametrize("length", [300, 301])
def test_the_source_is_said_whole_up_to_300_characters(tmp_path, target, caplog, length):
    """short_text(src, 300): a source folder's path of 300 characters is said whole, one of 301 is cut."""
    pad = length - len(str(tmp_path / "x" / "d"))
    folder = tmp_path / ("x" * (pad + 1)) / "d"
    assert len(str(folder)) == length
    folder.parent.mkdir()
    note = _note(folder, target, ["extra0.weight"], caplog)
    said = note.removeprefix("note: ").split(" does not load with spec")[0]
    assert (said == str(folder)) == (length <= 300) and len(said) <= 300, (len(said), note)
