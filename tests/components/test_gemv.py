"""One-row products chosen by measurement (``components/gemv.py``, ``decoding.linear: auto`` on CUDA): the
reduction computes ``F.linear``; the faster form is kept (the reduction only under MARGIN and where it agrees);
nothing is measured while a graph is captured or compiled; only one-row, fused, no-grad calls of the products
tried take the choice; and a model whose products took the reduction decodes the same tokens. The CPU stands in
for CUDA here (``DEVICES``), with a timer of the test's own."""

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import draftsmith
from draftsmith.components import fused, gemv


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(gemv, "CHOICES", {})
    monkeypatch.setattr(gemv, "DEVICES", ("cuda", "cpu"))


def timer(times: dict[str, float], calls: list | None = None):
    """A TIMER answering ``times['cublas']`` for F.linear and ``times['reduction']`` for anything else."""
    def timed(fn, args):
        if calls is not None:
            calls.append(fn)
        return times["cublas" if fn is F.linear else "reduction"]
    return timed


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("shape", [(48,), (1, 48), (1, 1, 48), (3, 48)])
@pytest.mark.parametrize("bias", [True, False])
def test_the_reduction_is_f_linear(dtype, tol, shape, bias):
    torch.manual_seed(0)
    x, w, b = torch.randn(shape).to(dtype), torch.randn(40, 48).to(dtype), torch.randn(40).to(dtype) if bias else None
    got = gemv.reduction(x, w, b)
    assert got.shape == (*shape[:-1], 40) and got.dtype == dtype
    torch.testing.assert_close(got.float(), F.linear(x, w, b).float(), atol=tol, rtol=tol)


def test_the_compiled_reduction_is_f_linear_on_inductors_cpu_backend():
    torch.manual_seed(0)
    x, w, b = torch.randn(1, 1, 96), torch.randn(64, 96), torch.randn(64)
    torch.testing.assert_close(gemv.compiled_reduction()(x, w, b), F.linear(x, w, b), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("reduction_us,form", [(9.0, "reduction"), (9.69, "reduction"), (9.7, "cublas"),
                                               (10.0, "cublas"), (12.0, "cublas")])
def test_the_reduction_is_kept_only_under_the_margin(monkeypatch, reduction_us, form):
    monkeypatch.setattr(gemv, "TIMER", timer({"cublas": 10.0, "reduction": reduction_us}))
    monkeypatch.setattr(gemv, "compiled_reduction", lambda: gemv.reduction)
    choice = gemv.choose(torch.randn(1, 48), torch.randn(40, 48), None)
    assert choice == gemv.Choice(form, 10.0, reduction_us)


@pytest.mark.parametrize("off,form", [(0.5, "reduction"), (1.5, "cublas")])
def test_agreement_is_within_the_tolerance_of_the_outputs_magnitude(monkeypatch, off, form):
    monkeypatch.setattr(gemv, "TIMER", timer({"cublas": 10.0, "reduction": 1.0}))
    x, w = torch.randn(1, 48) * 10, torch.randn(40, 48)
    size = F.linear(x, w).abs().max()
    assert size > 5   # far from 1, so the tolerance is read as a share of it
    monkeypatch.setattr(gemv, "compiled_reduction",
                        lambda: lambda x, w, b: F.linear(x, w, b) + off * gemv.TOLERANCE * size)
    assert gemv.choose(x, w, None).form == form


def test_the_compiled_reduction_raises_dynamos_recompile_limit():
    # dynamo's own patch, not monkeypatch: pytest >= 9.2 deletes on undo an attribute getattr_static cannot see,
    # and dynamo's config attributes live in the config module's table (every later compile then fails)
    with torch._dynamo.config.patch(recompile_limit=8):
        gemv.compiled_reduction.__wrapped__()
        assert torch._dynamo.config.recompile_limit == fused.RECOMPILES


def test_a_reduction_that_disagrees_or_raises_is_not_chosen(monkeypatch):
    monkeypatch.setattr(gemv, "TIMER", timer({"cublas": 10.0, "reduction": 1.0}))
    monkeypatch.setattr(gemv, "compiled_reduction", lambda: lambda x, w, b: F.linear(x, w, b) * 1.1)
    choice = gemv.choose(torch.randn(1, 48), torch.randn(40, 48), None)
    assert choice.form == "cublas" and math.isnan(choice.reduction_us) and "differed by" in choice.why

    def fails(*_):
        raise RuntimeError("no kernel")
    monkeypatch.setattr(gemv, "compiled_reduction", lambda: fails)
    choice = gemv.choose(torch.randn(1, 48), torch.randn(40, 48), None)
    assert choice.form == "cublas" and choice.why == "the reduction raised RuntimeError: no kernel"


def test_a_shape_is_measured_once_and_never_while_tracing(monkeypatch):
    calls, ran = [], []
    monkeypatch.setattr(gemv, "TIMER", timer({"cublas": 10.0, "reduction": 5.0}, calls))

    def marked(x, w, b):
        ran.append(tuple(w.shape))
        return gemv.reduction(x, w, b)
    monkeypatch.setattr(gemv, "compiled_reduction", lambda: marked)
    x, w = torch.randn(1, 48), torch.randn(40, 48)
    monkeypatch.setattr(gemv, "tracing", lambda x: True)
    assert torch.equal(gemv.product(x, w, None), F.linear(x, w)) and gemv.CHOICES == {} and not calls and not ran
    monkeypatch.setattr(gemv, "tracing", lambda x: False)
    for _ in range(3):
        torch.testing.assert_close(gemv.product(x, w, None), F.linear(x, w))
    assert len(calls) == 2 and list(gemv.CHOICES.values()) == [gemv.Choice("reduction", 10.0, 5.0)]
    gemv.product(x.double(), torch.randn(40, 48, dtype=torch.float64), None)   # another dtype: another key
    gemv.product(x, torch.randn(30, 48), None)
    # (40, 48): a check and three products in float32, a check and one in float64
    assert len(calls) == 6 and len(gemv.CHOICES) == 3 and ran.count((40, 48)) == 6
    assert gemv.describe()[0] == "40x48 float32: reduction (cuBLAS 10.0 us, reduction 5.0 us)"
    first = next(iter(gemv.CHOICES))
    gemv.CHOICES[first] = gemv.Choice("cublas", 10.0, math.nan, "the reduction raised E")
    assert gemv.describe()[0] == "40x48 float32: cublas (cuBLAS 10.0 us, reduction nan us); the reduction raised E"
    assert len(gemv.describe()) == 3 and len(gemv.describe(skip=[first])) == 2


def modules():
    torch.manual_seed(0)
    block = nn.ModuleDict({"deep": nn.Linear(64, 32), "square": nn.Linear(32, 32, bias=False),
                           "wide": nn.Linear(32, 96), "stacked": nn.Linear(64, 16)})
    block.stacked.stacked_part = True
    return block


@pytest.mark.parametrize("setting,fast,want", [("auto", True, ["deep", "square"]), ("auto", False, []),
                                               ("plain", True, []), ("packed", True, [])])
def test_products_tried_are_plain_unstacked_and_no_wider_than_deep(setting, fast, want):
    block = modules()
    keys = block.state_dict().keys()
    assert gemv.choose_products(block, setting, fast) == want
    assert [n for n, m in block.named_modules() if isinstance(m, gemv.ChosenProduct)] == want
    assert block.state_dict().keys() == keys and all(isinstance(m, nn.Linear) for m in block.values())
    assert not any(block[n].fused for n in want)   # until fuse_model switches the model's fused kernels on
    assert fused.fuse_model(block) == len(want) and all(block[n].fused for n in want)


@pytest.mark.parametrize("shape,on,grad,chosen", [((1, 64), True, False, True), ((1, 1, 64), True, False, True),
                                                  ((2, 64), True, False, False), ((1, 64), False, False, False),
                                                  ((1, 64), True, True, False), ((1, 64), True, "weight", False)])
def test_only_one_row_fused_no_grad_calls_take_the_choice(monkeypatch, shape, on, grad, chosen):
    block = modules().requires_grad_(grad == "weight")   # "weight": the weight wants a gradient, the input not
    grad = bool(grad)
    gemv.choose_products(block, "auto", True)
    block.deep.fused = on
    seen = []
    monkeypatch.setattr(gemv, "product", lambda x, w, b: seen.append(x.shape) or torch.zeros(*x.shape[:-1], 32))
    x = torch.randn(shape, requires_grad=grad and not block.deep.weight.requires_grad)
    with torch.set_grad_enabled(grad):
        out = block.deep(x)
    assert bool(seen) is chosen and out.shape == (*shape[:-1], 32)
    if not chosen:
        torch.testing.assert_close(out, F.linear(x, block.deep.weight, block.deep.bias))
    monkeypatch.setattr(gemv, "DEVICES", ("cuda",))    # the CPU is no device of the choice outside tests
    seen.clear()
    with torch.no_grad():
        block.deep(torch.randn(1, 64))
    assert not seen


def test_a_model_whose_products_took_the_reduction_decodes_the_same_tokens(monkeypatch):
    monkeypatch.setattr(gemv, "TIMER", timer({"cublas": 10.0, "reduction": 1.0}))
    ran = []

    def marked(x, w, b):
        ran.append(1)
        return gemv.reduction(x, w, b)
    monkeypatch.setattr(gemv, "compiled_reduction", lambda: marked)
    spec = draftsmith.load_spec("demo").with_decoding(linear="plain")
    model, plain = draftsmith.assemble(spec), draftsmith.assemble(spec)
    names = gemv.choose_products(model.target, "auto", True) + gemv.choose_products(model.draft, "auto", True)
    assert "model.layers.0.self_attn.o_proj" in names and "model.layers.0.mlp.down_proj" in names
    for m in (model.target, model.draft):
        for sub in m.modules():
            if isinstance(sub, gemv.ChosenProduct):
                sub.fused = True
    for prompt in ["def fib(n):", "import os\n"]:
        base = plain.generate_baseline(prompt, max_new_tokens=16).token_ids
        assert model.generate_baseline(prompt, max_new_tokens=16).token_ids == base
        assert model.generate(prompt, max_new_tokens=16, topk=1).token_ids == base
    assert ran and all(c.form == "reduction" for c in gemv.CHOICES.values())
