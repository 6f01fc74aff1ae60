"""Mutation survivors of components/stacked.py (scripts/mutate.py --fork over test_stacked, test_packed,
test_split_rule_kills, assembler/test_split_parts_counted, test_blocks_kills, assembler/test_parity,
decoding/test_hf_oracle): 34 of 37 killed; the 3 survivors are equivalent, argued here, and the test below pins the
premise the third rests on.

- stacked.py:99 stackable's ``first = linears[0]`` -> ``linears[1]``: the ``len(linears) < 2`` guard runs first,
  and every check against ``first`` is an equality (in_features, dtype, device, bias-ness; for FP8 siblings the
  stack_key and shared buffers too), so "all equal linears[0]" and "all equal linears[1]" are the same statement.
- stacked.py:33 Stacked's ``first = linears[0]`` -> ``linears[1]``: ``first`` gives in_features, bias-ness and
  (FP8) what its stack_key fixes only, and every Stacked is made by :func:`stack` (mlp.py, attention.py), which
  admits two or more siblings that agree on them (test_stacked.py::test_stackable_siblings_only).
- stacked.py:60 valid()'s ``_stored(parts[0]).device`` -> ``parts[1]``: ``and`` reads the device only when every
  sibling's weight (and bias) still has the data pointer of its row view, i.e. all still view the one stacked
  weight, on its one device; a sibling moved on its own fails the pointer check first (below), whichever it is.
"""
import pytest
import torch
from torch import nn

from draftsmith.components.stacked import stack


@pytest.mark.parametrize("moved", [0, 1, 2])
@pytest.mark.parametrize("to", ["meta", torch.float64])
def test_one_sibling_moved_on_its_own_runs_the_siblings_one_by_one(moved, to):
    torch.manual_seed(0)
    lins = [nn.Linear(32, n) for n in (48, 16, 16)]
    s = stack(lins)
    x = torch.randn(2, 32)
    with torch.no_grad():
        assert s(x) is not None
        lins[moved].to(to)
        assert s(x) is None
