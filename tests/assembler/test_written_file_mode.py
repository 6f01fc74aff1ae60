"""Weights draftsmith writes get the mode the umask gives any new file: safetensors writes 0600 whatever the umask,
so a converted draft (for vLLM) or the scale benchmark's shared checkpoints could not be read by other accounts
(a bench helper, 2026-11-30)."""
import os

import pytest
import torch

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.convert.run import convert
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture
def umask():
    before = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(before)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_saved_weights_take_the_umasks_mode(umask, tmp_path, mask, mode):
    umask(mask)
    path = save_safetensors({"w": torch.zeros(2)}, tmp_path / "f")
    assert path.stat().st_mode & 0o777 == mode


def test_a_converted_draft_is_readable_by_everyone_under_022(umask, tmp_path):
    target = write_target(tmp_path / "t")
    convert(write_eagle3(tmp_path / "d", target), "layers", tmp_path / "out")
    assert (tmp_path / "out" / "model.safetensors").stat().st_mode & 0o777 == 0o644


def test_the_umask_is_read_without_changing_it(umask, monkeypatch):
    """os.umask(0) to learn the mask gave another thread's new files 0o666 for that moment (a review)."""
    from draftsmith.assembler import checkpoint

    umask(0o027)
    monkeypatch.setattr(checkpoint.os, "umask", lambda *a: pytest.fail("changed the umask"))
    assert checkpoint.file_mode() == 0o640
