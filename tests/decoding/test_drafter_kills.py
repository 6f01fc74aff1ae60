"""Mutation survivors of draftsmith/decoding/drafter.py (scripts/mutate.py), each planted and seen failing."""
import pytest
import torch

from draftsmith.components import fused
from draftsmith.decoding.drafter import TreeExpander


def test_an_expander_built_without_fused_runs_the_eager_index_arithmetic(monkeypatch):
    # drafter.py:22  fused: bool = False -> fused: bool = True
    # components.fused: a module's flag is False by default and the eager function is the CPU path; compiling
    # would cost seconds per shape on a CPU, so nothing may reach torch.compile unless asked
    def refuse(fn):
        raise AssertionError(f"compiled {fn.__name__} without fused=True")

    monkeypatch.setattr(fused, "_compiled", refuse)
    calls = []

    def run(tokens, hidden, rows, pos, anc, from_target=False):
        calls.append(rows.tolist())
        return hidden, torch.zeros(*tokens.shape, 3)

    expand = TreeExpander(run, torch.zeros(1, 4), 2, 2, torch.tensor([True]))
    expand(torch.tensor([[0, 1]]), torch.tensor([[5, 6]]))
    assert calls == [[[0, 1]]]                 # both root children written to scratch rows 0 and 1
    with pytest.raises(AssertionError, match="compiled"):   # the stand-in does refuse a fused expander
        TreeExpander(run, torch.zeros(1, 4), 2, 2, torch.tensor([True]), fused=True)(
            torch.tensor([[0, 1]]), torch.tensor([[5, 6]]))
