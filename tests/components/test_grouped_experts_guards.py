"""Guards of the grouped experts a CUDA graph runs (components/experts.py), each planted as a bug by a review (h107)
and passed by the tests then: a down weight replaced leaves the stack (the graph would read the old one); a
recorded disagreement keeps a graph on the every-expert path; a copy of a model whose stack was left keeps the
experts' current weights (re-stacking the stale ones would put the old values back under their names)."""
import copy

import torch
from test_grouped_experts import blocks, folder, graph_path, on_cpu  # noqa: F401 (fixtures: the target, DEVICES cpu)
from torch import nn

from draftsmith.components import experts


def counted_graph_path(monkeypatch) -> list:
    calls = []
    graph_path(monkeypatch, calls)
    return calls


def test_a_replaced_down_weight_leaves_the_stack(folder, monkeypatch):  # noqa: F811
    block = blocks(folder)[1][0]
    x = torch.randn(1, 6, 64, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        block(x)   # the verdict: the grouped form agrees
        assert list(experts.VERDICTS.values()) == [True]
        e = block.experts[1]
        e.down_proj.weight = nn.Parameter(e.down_proj.weight * 3, requires_grad=False)   # a new tensor
        assert not block.stack.valid()
        eager = block(x)
        calls = counted_graph_path(monkeypatch)
        torch.testing.assert_close(block(x), eager, atol=1e-6, rtol=0)   # the new weight, every expert
    assert not calls


def test_a_recorded_disagreement_keeps_a_graph_on_every_expert(folder, monkeypatch):  # noqa: F811
    block = blocks(folder)[1][0]
    x = torch.randn(1, 5, 64, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        eager = block(x)
        experts.VERDICTS[next(iter(experts.VERDICTS))] = False   # as a probe that disagreed records it
        calls = counted_graph_path(monkeypatch)
        torch.testing.assert_close(block(x), eager, atol=1e-6, rtol=0)
    assert not calls


def test_a_copy_of_a_model_whose_stack_was_left_keeps_the_experts_weights(folder):  # noqa: F811
    model, layers = blocks(folder)
    e = layers[0].experts[2]
    new = torch.randn_like(e.gate_proj.weight)
    e.gate_proj.weight = nn.Parameter(new, requires_grad=False)   # the stacks (gate | up, the experts') left
    assert not layers[0].stack.valid()
    twin = copy.deepcopy(model)
    copied = twin.model.layers[0].mlp
    assert torch.equal(copied.experts[2].gate_proj.weight, new)
    assert copied.stack is None or not copied.stack.valid()
