"""Mutation round 26 on draftsmith.components.gemv (the CPU stands in for CUDA, as in test_gemv.py): the compiled
reduction is static per shape, a reduction's exception is cut to 300 characters in the choice's why, agreement
includes its bound, a Choice is frozen, and describe() names the weight's dtype."""

import pytest
import torch
from torch.nn import functional as F

from draftsmith.components import gemv


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(gemv, "CHOICES", {})
    monkeypatch.setattr(gemv, "DEVICES", ("cuda", "cpu"))


def test_the_compiled_reduction_is_compiled_static(monkeypatch):
    """compiled_reduction compiles :func:`gemv.reduction` with dynamic=False: one kernel tuned per N and K, not a
    shape-generic one (kills dynamic=False -> True)."""
    seen = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: seen.append((fn, kw)) or fn)
    with torch._dynamo.config.patch(recompile_limit=8):   # allow_recompiles() writes dynamo's config
        assert gemv.compiled_reduction.__wrapped__() is gemv.reduction
    assert seen == [(gemv.reduction, {"dynamic": False})]


def test_a_reduction_that_raises_a_long_message_is_cut_to_300_characters(monkeypatch):
    """The why of a reduction that raised is 'the reduction raised E: message' cut to exactly 300 characters (kills
    the slice's 300 -> 299 / 301)."""
    monkeypatch.setattr(gemv, "TIMER", lambda fn, args: 10.0)

    def fails(*_):
        raise RuntimeError("m" * 1000)
    monkeypatch.setattr(gemv, "compiled_reduction", lambda: fails)
    choice = gemv.choose(torch.randn(1, 48), torch.randn(40, 48), None)
    assert choice.form == "cublas" and len(choice.why) == 300
    assert choice.why == ("the reduction raised RuntimeError: " + "m" * 1000)[:300]


def test_a_reduction_off_by_exactly_the_tolerance_still_agrees(monkeypatch):
    """Agreement is |reduction - cuBLAS| <= TOLERANCE x max |cuBLAS|, the bound included: outputs of largest
    magnitude 50 and a reduction off by exactly 0.02 x 50 = 1 keep the (faster) reduction (kills ``<=`` -> ``<``)."""
    monkeypatch.setattr(gemv, "TIMER", lambda fn, args: 10.0 if fn is F.linear else 1.0)
    monkeypatch.setattr(gemv, "compiled_reduction",
                        lambda: lambda x, w, b: F.linear(x, w, b) + 1.0)
    x = torch.zeros(1, 8)
    x[0, 0] = 1.0
    w = torch.zeros(4, 8)
    w[:, 0] = torch.tensor([50.0, -3.0, 7.0, 0.0])
    assert gemv.TOLERANCE * 50.0 == 1.0
    assert gemv.choose(x, w, None) == gemv.Choice("reduction", 10.0, 1.0)


def test_a_choice_is_frozen_and_hashable():
    """Choice is a frozen dataclass: CHOICES' records cannot be edited in place and hash by value (kills
    ``frozen=True`` -> False, which makes them mutable and unhashable)."""
    import dataclasses

    c = gemv.Choice("cublas", 10.0, 5.0)
    assert hash(c) == hash(gemv.Choice("cublas", 10.0, 5.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.form = "reduction"


def test_describe_names_the_weights_dtype(monkeypatch):
    """describe() reads the key's weight dtype (key[1]), not the input's (key[2]): a bfloat16 weight fed float32
    rows is said bfloat16 (kills key[1] -> key[2])."""
    key = ((40, 48), torch.bfloat16, torch.float32, False, torch.device("cpu"))
    monkeypatch.setattr(gemv, "CHOICES", {key: gemv.Choice("cublas", 3.0, 2.0)})
    assert gemv.describe() == ["40x48 bfloat16: cublas (cuBLAS 3.0 us, reduction 2.0 us)"]
