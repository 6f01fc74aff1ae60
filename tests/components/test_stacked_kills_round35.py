"""Mutation survivors (round 35) of draftsmith.components.stacked: a product re-based onto the experts' stack
(Stacked.rebase) holds its weight frozen, as every stacked product does: a frozen model's expert run with autograd
on gives an output no gradient is recorded for (the stacked weight is no model parameter that requires_grad_ sees)."""
import pytest
import torch

from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends, experts, stacked
from draftsmith.registry import default_registry
from draftsmith.testing import write_target


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("qwen_moe_rebase"), "qwen3_moe", seed=4, num_hidden_layers=2,
                        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16)


# catches stacked.py rebase: nn.Parameter(weight, requires_grad=False) -> True
def test_a_rebased_product_is_frozen(folder, monkeypatch):
    monkeypatch.setattr(experts, "DEVICES", ("cpu",))
    model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]
    model.requires_grad_(False)
    stacked.stack_model(model)
    expert = model.model.layers[0].mlp.experts[1]
    assert model.model.layers[0].mlp.stack is not None and not expert.gate_up.linear.weight.requires_grad
    with torch.enable_grad():
        assert not expert(torch.randn(3, 64)).requires_grad
