"""Kills for components/packed.py survivors (round 28): dtypes() holds bfloat16 wherever oneDNN reorders a bfloat16
weight (found by trying here, not by asking dtypes), and forget_packed leaves the modules it did not pack alone."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from draftsmith.components import packed


def _reorders(dtype) -> bool:
    # whether this build and CPU reorder a oneDNN linear weight of ``dtype`` (a 4x4 one: any non-empty size says it)
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.ones(4, 4, dtype=dtype), None)
        return True
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


pytestmark = pytest.mark.skipif(not _reorders(torch.float32), reason="this torch build has no oneDNN linear")


def test_dtypes_holds_bfloat16_exactly_where_onednn_reorders_a_bfloat16_weight():
    """dtypes() is float32, plus bfloat16 where the bf16 reorder runs (an AVX512/AVX-NE-CONVERT CPU)."""
    packed.dtypes.cache_clear()
    try:
        want = (torch.float32, torch.bfloat16) if packed.available() and _reorders(torch.bfloat16) \
            else (torch.float32,)
        assert packed.dtypes() == want
    finally:
        packed.dtypes.cache_clear()


@pytest.mark.skipif(not _reorders(torch.bfloat16), reason="this CPU has no oneDNN bfloat16 linear")
def test_a_bfloat16_linear_is_packed_where_onednn_runs_bfloat16():
    """A bfloat16 model on a CPU with oneDNN's bf16 path gets packed weights (and the same answers as F.linear)."""
    packed.dtypes.cache_clear()
    try:
        torch.manual_seed(0)
        lin = nn.Linear(48, 80).to(torch.bfloat16).requires_grad_(False)
        assert packed.pack_linears(lin) == [""]
        assert lin._packed is not None
        x = torch.randn(5, 48).to(torch.bfloat16)
        calls = []
        real = packed.matmul
        packed.matmul = lambda *a: calls.append(1) or real(*a)
        try:
            out = lin(x)
        finally:
            packed.matmul = real
        assert calls == [1]
        torch.testing.assert_close(out.float(), F.linear(x, lin.weight, lin.bias).float(), atol=2e-2, rtol=2e-2)
    finally:
        packed.dtypes.cache_clear()


def test_forget_packed_gives_no_packed_copy_to_a_module_it_did_not_pack():
    """forget_packed drops the copies of packed modules only: a plain Linear, a norm and the container beside them
    are given no ``_packed`` attributes."""
    big, small, norm = nn.Linear(48, 80), nn.Linear(4, 4), nn.LayerNorm(4)
    model = nn.Sequential(big, small, norm).requires_grad_(False)
    assert packed.pack_linears(model, min_elements=100) == ["0"]
    big(torch.randn(3, 48))
    assert big._packed is not None
    packed.forget_packed(model)
    assert big._packed is None and big._packed_key is None
    for m in (model, small, norm):
        assert "_packed" not in vars(m) and "_packed_key" not in vars(m), type(m).__name__
