"""gpt-oss's RMSNorm applies its weight in float32 before the cast back (transformers keeps those norms in float32);
Llama's casts to the input's dtype first. In bfloat16 the two round differently: each is computed as its type's."""
import pytest
import torch
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRMSNorm
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from draftsmith.components.norms import RMSNorm


def pair(ref_cls, **ours):
    g = torch.Generator().manual_seed(0)
    ref = ref_cls(64, eps=1e-5)
    ref.weight.data = 1 + torch.randn(64, generator=g) * 0.3
    norm = RMSNorm(64, 1e-5, **ours)
    norm.weight.data = ref.weight.data.clone()
    x, delta = (torch.randn(4, 7, 64, generator=g) * 3 for _ in range(2))
    return ref, norm, x, delta


@pytest.mark.parametrize("ref_cls, ours", [(GptOssRMSNorm, {"float32_weight": True}), (LlamaRMSNorm, {})])
def test_bfloat16_rounds_bit_for_bit_as_the_type_s_norm(ref_cls, ours):
    ref, norm, x, delta = pair(ref_cls, **ours)
    ref, norm, x, delta = ref.to(torch.bfloat16), norm.to(torch.bfloat16), x.bfloat16(), delta.bfloat16()
    assert torch.equal(norm(x), ref(x))
    assert torch.equal(norm.add_forward(x, delta)[1], ref(x + delta))


def test_the_two_orders_differ_in_bfloat16_so_the_test_can_fail():
    ref, norm, x, _ = pair(GptOssRMSNorm)   # ours without float32_weight: Llama's order
    assert not torch.equal(norm.to(torch.bfloat16)(x.bfloat16()), ref.to(torch.bfloat16)(x.bfloat16()))


def test_a_gpt_oss_target_s_norms_apply_their_weight_in_float32():
    from draftsmith.assembler.parts import target_recipe
    from draftsmith.components.targets import TARGETS

    assert target_recipe(TARGETS["gpt_oss"](), False).norm == ("rms", {"float32_weight": True})
    assert target_recipe(TARGETS["llama"](), False).norm == ("rms", {})
