"""Mutation survivors (round 37) of draftsmith.components.experts: an ExpertStack of fused experts runs the compiled
activation (grouped_args' default is not ``eager``), traceable's meta run takes the eager one; plain refuses tensors
of 1-byte floats or of integers even all of one dtype, and takes a list of one tensor."""
import pytest
import torch

from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends, experts, stacked
from draftsmith.components.fused import silu_mul
from draftsmith.registry import default_registry
from draftsmith.testing import write_target

QWEN = {"num_hidden_layers": 1, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "head_dim": 16, "norm_topk_prob": False}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("qwen_moe37"), "qwen3_moe", seed=7, **QWEN)


@pytest.fixture(autouse=True)
def on_cpu(monkeypatch):
    monkeypatch.setattr(experts, "DEVICES", ("cpu",))
    monkeypatch.setattr(experts, "VERDICTS", {})
    monkeypatch.setattr(experts, "TRACEABLE", {})


def twin(gate, up):
    raise RuntimeError("the compiled twin ran")


@pytest.fixture
def fused_stack(folder, monkeypatch):
    """A bfloat16 layer's stack whose experts are fused; kernel() hands out ``twin`` for a compiled function."""
    model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.bfloat16, device="cpu")[0]
    stacked.stack_model(model)
    stack = model.model.layers[0].mlp.stack
    assert stack is not None
    for e in stack.experts:
        e.fused = True
    monkeypatch.setattr(experts, "kernel", lambda fn, fused: twin if fused else fn)
    return stack


# catches grouped_args(self, eager=False) -> eager=True, and `fused and not eager` -> `fused and eager`: a fused
# layer's graph would run the eager activation (or traceable the compiled one)
def test_a_fused_stack_runs_the_compiled_activation_and_eager_asks_for_the_plain_one(fused_stack):
    assert fused_stack.grouped_args()["act"].args[0] is twin
    assert fused_stack.grouped_args(eager=True)["act"].args[0] is silu_mul
    x = torch.randn(3, fused_stack.down.shape[1]).bfloat16()
    chosen = torch.tensor([[0, 1], [2, 3], [1, 2]])
    with pytest.raises(RuntimeError, match="compiled twin"):
        fused_stack(x, chosen, torch.full((3, 2), 0.5))
    for e in fused_stack.experts:
        e.fused = False
    assert fused_stack.grouped_args()["act"].args[0] is silu_mul


# catches traceable's grouped_args(eager=True) -> eager=False: the meta run would call the compiled twin
def test_traceable_runs_the_eager_activation_over_meta_tensors(fused_stack):
    x = torch.randn(1, fused_stack.down.shape[1]).bfloat16()
    key = fused_stack.key(x, 2)
    assert experts.traceable(fused_stack, key) is True
    assert experts.TRACEABLE == {key: True}


# catches plain's `is_floating_point and element_size() >= 2` -> `or`, and `>= 2` -> `>= 1`: tensors all of one
# 1-byte float dtype (FP8 experts) or of an integer dtype are no plain ones
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.int16, torch.int32])
def test_tensors_all_of_one_dtype_that_is_no_plain_float_are_refused(dtype):
    tensors = [torch.zeros(4, 8).to(dtype), torch.zeros(8, 4).to(dtype)]
    assert not experts.plain(tensors)
    assert experts.plain([t.to(torch.bfloat16) for t in tensors])


# catches plain's tensors[0].device -> tensors[1].device: one tensor is a list plain takes
def test_one_tensor_is_plain():
    assert experts.plain([torch.zeros(2, 2)])
    assert not experts.plain([])
