"""One-row products chosen by measurement on CUDA (``components/gemv.py``): the timer gives device times, the
compiled reduction runs and agrees with cuBLAS at an 8B layer's shapes, and a model whose fused path chose its
products decodes what target-only decodes (float32). Skipped without CUDA (see conftest)."""
import math

import pytest
import torch
from torch.nn import functional as F

import draftsmith
from draftsmith.components import gemv

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape", [(4096, 4096), (4096, 14336)])   # o_proj, down_proj at 8B
def test_both_forms_run_and_agree_at_8b_shapes(shape):
    torch.manual_seed(0)
    w = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 0.02
    x = torch.randn(1, 1, shape[1], device="cuda", dtype=torch.bfloat16)
    choice = gemv.choose(x, w, None)
    assert choice.why == "" and 0 < choice.cublas_us < 1e4 and 0 < choice.reduction_us < 1e4, choice
    torch.testing.assert_close(gemv.compiled_reduction()(x, w, None), F.linear(x, w), atol=2e-2, rtol=2e-2)
    # the timer reads device time: a product 4x the bytes takes longer
    assert gemv.cuda_us(F.linear, (x, w.repeat(4, 1), None)) > choice.cublas_us


def test_a_compiled_model_chooses_its_products_and_decodes_what_target_only_decodes(monkeypatch):
    monkeypatch.setattr(gemv, "CHOICES", {})
    spec = draftsmith.load_spec("demo").with_decoding(graphs="compile")
    model = draftsmith.assemble(spec, device="cuda", dtype="float32")
    assert any(isinstance(m, gemv.ChosenProduct) for m in model.target.modules())
    for prompt in ["def fibonacci(n):", "import os\n\nclass "]:
        base = model.generate_baseline(prompt, max_new_tokens=24).token_ids
        assert model.generate(prompt, max_new_tokens=24, topk=1).token_ids == base
        assert model.generate(prompt, max_new_tokens=24).token_ids == base
    assert gemv.CHOICES and all(math.isfinite(c.cublas_us) for c in gemv.CHOICES.values()), gemv.describe()
