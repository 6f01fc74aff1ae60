"""Kills for convert/fits.py survivors (round 21b): the stand-in guessing other heads and depth builds for a draft
tapping the outputs of a deep target's layers (its layers are more than the deepest tap, not fewer), and a dimension
is left unjudged where a guess's model lacks the tensor or holds it at another rank."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from safetensors.torch import load_file, save_file

from draftsmith.convert.fits import _decided, fit
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.testing import write_eagle3, write_target


def test_a_draft_tapping_a_deep_targets_layer_outputs_is_still_judged(tmp_path: Path):
    """Taps [2, 39, 76] read as layer outputs (``at: output``, SGLang) are inputs 3, 40, 77: a stand-in of 77 layers
    or more. The stand-in guessing other heads and depth must build too (one layer more, not one fewer), else nothing
    is judged and a head of 40 rows against draft_vocab_size 50 went unrefused."""
    draft = write_eagle3(tmp_path / "d", write_target(tmp_path / "t"), draft_vocab=50, aux_ids=[2, 39, 76])
    tensors = load_file(draft / "model.safetensors")
    save_file(tensors | {"lm_head.weight": tensors["lm_head.weight"][:40].contiguous()}, draft / "model.safetensors",
              metadata={"format": "pt"})
    spec = inspect_checkpoint(draft).spec
    spec["draft"]["fusion"]["aux_layers"] = {"ids": [2, 39, 76], "at": "output"}
    assert fit(draft, spec).refused == [
        "tensor 'lm_head.weight' is [40, 64] in the checkpoint, the model its config describes expects [50, 64]"]


def _expects(**shapes) -> dict:
    return {canon: SimpleNamespace(shape=shape, also=()) for canon, shape in shapes.items()}


def test_a_tensor_a_guess_does_not_have_or_holds_at_another_rank_is_not_judged():
    """_decided: a guess whose model has no such tensor, or has it at another rank, leaves not even the rank
    decided (None); a guess whose model did not build is no guess; guesses agreeing decide the dimension."""
    agree = _expects(t2d=(96,))
    assert _decided("t2d", (96,), {"other": agree, "vocab": _expects(), "width": agree}) is None
    assert _decided("t2d", (96,), {"other": agree, "vocab": _expects(t2d=(96, 1)), "width": agree}) is None
    assert _decided("t2d", (96,), {"other": agree, "vocab": _expects(t2d=(192,)), "width": None}) == (None,)
    assert _decided("t2d", (96,), {"other": agree, "vocab": agree, "width": None}) == (96,)
    assert _decided("t2d", (96,), {"other": None, "vocab": agree, "width": agree}) is None
