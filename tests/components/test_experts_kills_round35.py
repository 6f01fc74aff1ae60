"""Mutation survivors (round 35) of draftsmith.components.experts: a stack whose experts' down weight was replaced is
not valid; experts with a bias, or of 1-byte floats, are not stacked; a one-expert layer stacks and runs; the probe's
verdict is False where the grouped form raised, True where it differs within TOLERANCE (its bound included), and
its log lines name the stack's shapes and at most 200 characters of an error."""
import logging

import pytest
import torch
from torch import nn

from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends, experts, moe, stacked
from draftsmith.registry import default_registry
from draftsmith.testing import write_target

QWEN = {"num_hidden_layers": 2, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "head_dim": 16, "norm_topk_prob": False}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("qwen_moe35"), "qwen3_moe", seed=6, **QWEN)


@pytest.fixture(autouse=True)
def on_cpu(monkeypatch):
    monkeypatch.setattr(experts, "DEVICES", ("cpu",))
    monkeypatch.setattr(experts, "VERDICTS", {})


def block(folder, layer=0):
    model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]
    stacked.stack_model(model)
    return model.model.layers[layer].mlp


# catches experts.py valid(): ... and self._ptrs() == self.ptrs -> or (a replaced down weight left the stack, and
# a graph would read the stale one)
def test_a_replaced_down_weight_leaves_the_stack(folder):
    b = block(folder)
    assert b.stack.valid()
    e = b.experts[1]
    e.down_proj.weight = nn.Parameter(e.down_proj.weight.detach().clone())
    assert e.gate_up.valid() and not b.stack.valid()


# catches experts.py stackable's plain(): and -> or, and all(gate_up is not None and ...) -> or
def test_experts_with_a_bias_are_not_stacked(folder):
    b = block(folder)
    assert experts.stackable(list(b.experts))
    b.experts[2].down_proj.bias = nn.Parameter(torch.zeros(b.experts[2].down_proj.out_features))
    assert not experts.stackable(list(b.experts))


# catches experts.py element_size() >= 2 -> >= 1 (a 1-byte float weight is no plain one to stack)
def test_experts_of_one_byte_floats_are_not_stacked(folder):
    b = block(folder)
    for e in b.experts:
        e.down_proj._parameters["weight"] = nn.Parameter(e.down_proj.weight.detach().to(torch.float8_e4m3fn),
                                                         requires_grad=False)
    assert not experts.stackable(list(b.experts))


# catches experts.py experts[0] -> experts[1] (stackable's device, the stack's fused setting): one expert is a layer
def test_a_single_expert_stacks_and_runs(folder):
    e = block(folder).experts[3]
    assert experts.stackable([e])
    stack = experts.ExpertStack([e])
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(4))
    chosen, w = torch.zeros(5, 1, dtype=torch.long), torch.rand(5, 1, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        torch.testing.assert_close(stack(x, chosen, w), e(x) * w, atol=1e-6, rtol=0)


def probed(b, x):
    with torch.no_grad():
        chosen, w = b.gate.choose(x)
        want = b.chosen_experts(x, moe.dense(chosen, w, len(b.experts)))
        experts.probe(b.stack, x, chosen, w, want)
    return want


# catches experts.py VERDICTS[key] = False -> True where the grouped form raised; and the log's key[0] / [:200]
def test_a_grouped_form_that_raises_is_not_chosen_and_its_error_is_cut(folder, monkeypatch, caplog):
    b = block(folder)

    def raises(*a, **k):
        raise RuntimeError("x" * 300)
    monkeypatch.setattr(experts, "grouped", raises)
    with caplog.at_level(logging.INFO, logger="draftsmith"):
        probed(b, torch.randn(6, 64))
    assert list(experts.VERDICTS.values()) == [False]
    said = caplog.text
    assert str(b.stack.shapes) in said and "x" * 200 in said and "x" * 201 not in said


# catches experts.py err <= TOLERANCE * size -> TOLERANCE // size (only a bit-equal form would be chosen) and the
# verdict's log key[0] -> key[1]
def test_a_grouped_form_within_tolerance_is_chosen(folder, monkeypatch, caplog):
    b = block(folder)
    real = experts.grouped
    monkeypatch.setattr(experts, "grouped", lambda *a, **k: real(*a, **k) * (1 + 1e-3))
    with caplog.at_level(logging.INFO, logger="draftsmith"):
        want = probed(b, torch.randn(6, 64, generator=torch.Generator().manual_seed(6)))
    assert want.abs().max() > 0.05 and list(experts.VERDICTS.values()) == [True]
    assert str(b.stack.shapes) in caplog.text and "used in graphs" in caplog.text


# catches experts.py err <= TOLERANCE * size -> < (the bound is within): with TOLERANCE 1, twice the loop's output
# differs by exactly its largest value
def test_a_difference_of_exactly_the_tolerance_is_within_it(folder, monkeypatch):
    b = block(folder)
    real = experts.grouped
    monkeypatch.setattr(experts, "TOLERANCE", 1.0)
    monkeypatch.setattr(experts, "grouped", lambda *a, **k: real(*a, **k) * 2)
    probed(b, torch.randn(6, 64, generator=torch.Generator().manual_seed(7)))
    assert list(experts.VERDICTS.values()) == [True]
