"""Mutation survivors (round 34) of draftsmith.components.moe: a DeepSeek-V3 with two shared experts (one MLP twice
as wide) equals transformers' block; eagerly an expert no row chose never runs and a chosen one runs once over the
rows that chose it; a type with no shared experts reads no shared_experts tensor (a stray one is unexpected)."""
import pytest
import torch
from safetensors.torch import load_file, save_file
from test_moe_targets import QWEN, ours, reference, write_moe

from draftsmith.assembler.assemble import plan_target
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components import backends
from draftsmith.registry import default_registry
from draftsmith.testing import write_target


# catches moe.py SwiGLU(hidden, width * shared) -> width // shared (one shared expert cannot tell them apart)
def test_two_shared_experts_are_one_mlp_twice_as_wide(tmp_path):
    folder = write_moe(tmp_path / "t", n_shared_experts=2)
    theirs, (model, _) = reference(folder, torch.float64)[1], ours(folder, torch.float64)
    assert model.model.layers[1].mlp.shared_experts.up_proj.weight.shape == (64, 64)
    x = torch.randn(2, 20, 64, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        for i in (1, 2):
            torch.testing.assert_close(model.model.layers[i].mlp(x), theirs.model.layers[i].mlp(x), atol=1e-12, rtol=0)


# catches moe.py weights.ne(0) -> weights.ne(1) (every expert over every row: the same sums, n_experts / top_k the work)
def test_only_the_chosen_experts_run_each_over_the_rows_that_chose_it(tmp_path):
    model = ours(write_moe(tmp_path / "t"), torch.float64)[0]
    block = model.model.layers[2].mlp
    x = torch.randn(3, 64, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    calls = {}
    for e, expert in enumerate(block.experts):
        expert.register_forward_hook(lambda m, args, out, e=e: calls.setdefault(e, []).append(args[0].shape[0]))
    with torch.no_grad():
        weights = block.gate(x)
        block(x)
    chose = weights.ne(0).sum(0).tolist()
    assert sum(chose) == 6   # 3 rows, top-2 of 4 experts: no expert is every row's
    assert calls == {e: [n] for e, n in enumerate(chose) if n}


def _stray_shared(folder, layer):
    path = folder / "model.safetensors"
    state = load_file(str(path))
    state[f"model.layers.{layer}.mlp.shared_experts.up_proj.weight"] = torch.zeros(32, 64)
    save_file(state, str(path), metadata={"format": "pt"})
    return folder


# catches moe.py empty_shared=bool(params.shared_key) and not shared -> or (a Qwen3-MoE's stray shared_experts
# tensor taken as a copy it may hold)
def test_a_stray_shared_expert_tensor_in_a_type_without_them_is_unexpected(tmp_path):
    folder = _stray_shared(write_target(tmp_path / "q", "qwen3_moe", seed=2, **QWEN, norm_topk_prob=True), 1)
    with pytest.raises(CheckpointMismatch, match=r"model\.layers\.1\.mlp\.shared_experts\.up_proj\.weight"):
        plan_target(folder, default_registry(), backends.sdpa)
