"""Stacking an MoE layer's experts (components/experts.py) keeps each expert weight's requires_grad, as Stacked keeps
its parts' (gate | up): a down_proj weight is not frozen, nor thawed, by being made a view of the stack."""
import pytest
import torch

from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends, experts, stacked
from draftsmith.registry import default_registry
from draftsmith.testing import write_target


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("qwen_moe_grad"), "qwen3_moe", seed=3, num_hidden_layers=2,
                        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16)


@pytest.mark.parametrize("trained", [True, False])
def test_stacking_the_experts_keeps_their_requires_grad(folder, monkeypatch, trained):
    monkeypatch.setattr(experts, "DEVICES", ("cpu",))
    model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]
    model.requires_grad_(trained)
    stacked.stack_model(model)
    block = model.model.layers[1].mlp
    assert block.stack is not None and block.stack.valid()
    assert {p.requires_grad for p in model.parameters()} == {trained}
