"""Mutation survivors (round 34) of draftsmith.decoding.arguments' kept-dtype skip (_kept): a DeepSeek-V3 MoE target
assembled in bfloat16 keeps its routers' float32 weights, which are never named as the part cast afterwards; the
part actually cast is (at the first call, and at a later one that reads the cached list)."""
import sys
from pathlib import Path

import pytest
import torch

import draftsmith
from draftsmith.decoding.arguments import placement_problems
from draftsmith.testing import write_eagle3

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assembler"))
from test_moe_targets import write_moe


@pytest.fixture()
def model(tmp_path):
    target = write_moe(tmp_path / "t")
    return draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "d", target),
                               dtype="bfloat16")


def test_the_routers_float32_weights_are_where_assemble_put_them(model):
    assert model.target.model.layers[1].mlp.gate.weight.dtype == torch.float32
    assert placement_problems(model) == [] and placement_problems(model) == []


@pytest.mark.parametrize("checked_before", [False, True])
def test_the_part_cast_afterwards_is_named_not_a_router(model, checked_before):
    if checked_before:
        assert placement_problems(model) == []
    model.target.model.layers[2].mlp.experts[3].to(torch.float32)
    said = placement_problems(model)
    assert len(said) == 1 and said[0].startswith(
        "the target's weights are float32 on cpu (model.layers.2.mlp.experts.3."), said


# catches arguments.py element_size() > 1 -> > 2 in placement_problems and _floating (a part cast to a 2-byte dtype
# was missed, or the scan found no parameter to name)
def test_a_part_cast_to_bfloat16_in_a_float32_model_is_named(tmp_path):
    target = write_moe(tmp_path / "t")
    model = draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "d", target))
    model.target.model.layers[2].mlp.experts[3].to(torch.bfloat16)
    said = placement_problems(model)
    assert len(said) == 1 and said[0].startswith(
        "the target's weights are bfloat16 on cpu (model.layers.2.mlp.experts.3."), said
