"""Round 37b: the offset (Gemma) and float32_weight RMSNorms in norms.py - norm_cat's fused path (one rms_norm_cat
kernel) is taken only by two fused norms neither of which applies its weight in float32 (that kernel knows no
offset), ``rms`` reads no offset nor float32_weight from params without them, and extra_repr names each kind."""
from types import SimpleNamespace

import pytest
import torch

from draftsmith.components import norms
from draftsmith.components.norms import RMSNorm, norm_cat, rms


def _norm(offset, fused):
    torch.manual_seed(0)
    n = RMSNorm(8, 1e-6, offset=offset)
    with torch.no_grad():
        n.weight.copy_(torch.randn(8) * 0.5)
    n.fused = fused
    return n


@pytest.mark.parametrize("offset_a, offset_b", [(1.0, 1.0), (1.0, 0.0), (0.0, 1.0), (0.0, 0.0)])
def test_norm_cat_fused_keeps_each_norms_offset(monkeypatch, offset_a, offset_b):
    """Fused norms (a CUDA run's, here eager: the kernel is the function itself) give what unfused ones give: an
    offset norm on either side is computed on its own, not by rms_norm_cat, which would drop its offset."""
    monkeypatch.setattr(norms, "kernel", lambda fn, fused: fn)
    a, b = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    want_cat, want_b = norm_cat(_norm(offset_a, False), a, _norm(offset_b, False), b)
    got_cat, got_b = norm_cat(_norm(offset_a, True), a, _norm(offset_b, True), b)
    torch.testing.assert_close(got_cat, want_cat)
    torch.testing.assert_close(got_b, want_b)
    ref = torch.cat([norms.offset_rms_norm(x, _norm(o, False).weight, 1e-6, o) if o else
                     norms.rms_norm(x, _norm(o, False).weight, 1e-6) for x, o in ((a, offset_a), (b, offset_b))], -1)
    torch.testing.assert_close(got_cat, ref)


def test_rms_of_params_without_the_fields_is_llama_s():
    plain = rms(SimpleNamespace(), dim=4, eps=1e-5)
    assert (plain.offset, plain.upcast) == (0.0, False)
    x = torch.randn(3, 4, dtype=torch.bfloat16)
    plain.weight.data = torch.full((4,), 1.1, dtype=torch.bfloat16)
    torch.testing.assert_close(plain(x), norms.rms_norm(x, plain.weight, 1e-5), rtol=0, atol=0)
    assert rms(SimpleNamespace(offset=1.0), dim=4, eps=1e-5).upcast
    assert rms(SimpleNamespace(float32_weight=True), dim=4, eps=1e-5).upcast


def test_extra_repr_names_each_kind():
    assert RMSNorm(4, 1e-6).extra_repr() == "4, eps=1e-06"
    assert RMSNorm(4, 1e-6, offset=1.0).extra_repr() == "4, eps=1e-06, offset=1.0"
    assert RMSNorm(4, 1e-6, float32_weight=True).extra_repr() == "4, eps=1e-06, float32_weight"
    assert RMSNorm(4, 1e-6, offset=1.0, float32_weight=True).extra_repr() == "4, eps=1e-06, offset=1.0"
