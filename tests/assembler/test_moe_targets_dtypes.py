"""Mixture-of-experts targets past the float32 / top-2 / one-shared-expert case test_moe_targets.py covers: a
DeepSeek-V3 target assembled in bfloat16 or float64 decodes (its router's float32 weight, kept as transformers keeps
it, is not a weight "cast after assembly"); top_k >= 3 weights are summed in transformers' (unsorted) order, so the
block equals transformers' at float64 rounding and the real configs' top-8 logits in bfloat16 are transformers'
bit for bit; n_shared_experts 0 loads as transformers saves it (a 0-wide shared MLP's empty tensors) or without."""
import pytest
import torch
from safetensors.torch import load_file, save_file
from test_moe_targets import ours, reference, write_moe

import draftsmith
from draftsmith.testing import write_eagle3

WIDE = {"n_routed_experts": 8, "n_group": 4, "topk_group": 2, "num_experts_per_tok": 4}   # 4 of the 4 allowed


@pytest.mark.parametrize("dtype", ["bfloat16", "float64"])
def test_a_deepseek_moe_target_decodes_in_a_dtype_other_than_its_router_s(tmp_path, dtype):
    target = write_moe(tmp_path / "t")
    model = draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "d", target),
                                dtype=dtype)
    assert model.target.model.layers[1].mlp.gate.weight.dtype == torch.float32
    base = model.generate_baseline([[5], [1, 2, 3, 4, 5, 6]], max_new_tokens=8, stop=[])
    out = model.generate([[5], [1, 2, 3, 4, 5, 6]], max_new_tokens=8, stop=[])
    if dtype == "float64":
        assert [o.token_ids for o in out] == [b.token_ids for b in base]
    assert all(len(o.token_ids) == 8 for o in out)


def test_more_than_two_chosen_experts_sum_their_weights_in_transformers_order(tmp_path):
    folder = write_moe(tmp_path / "t", **WIDE)
    theirs, (model, _) = reference(folder, torch.float64)[1], ours(folder, torch.float64)
    x = torch.randn(2, 20, 64, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        for i in (1, 2):
            torch.testing.assert_close(model.model.layers[i].mlp(x), theirs.model.layers[i].mlp(x), atol=1e-12, rtol=0)
    torch.testing.assert_close(ours(folder, torch.bfloat16)[1], reference(folder, torch.bfloat16)[0], atol=0, rtol=0)


@pytest.mark.parametrize("saved", ["empty tensors", "none"])
def test_no_shared_experts_load_as_transformers_saves_them_or_without(tmp_path, saved):
    folder = write_moe(tmp_path / "t", n_shared_experts=0)
    path = folder / "model.safetensors"
    state = load_file(str(path))
    assert state["model.layers.1.mlp.shared_experts.up_proj.weight"].shape == (0, 64)   # transformers' own save
    if saved == "none":
        save_file({n: t for n, t in state.items() if ".shared_experts." not in n}, str(path), metadata={"format": "pt"})
    want = reference(folder, torch.float64)[0]
    model, got = ours(folder, torch.float64)
    assert model.model.layers[1].mlp.shared_experts is None
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_a_router_moved_alone_to_another_device_is_named(tmp_path):
    # its dtype is its own (kept float32), its device is the model's: the placement check reads it for that
    import torch.nn as nn

    from draftsmith.decoding.arguments import placement_problems

    target = write_moe(tmp_path / "t")
    model = draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "d", target),
                                dtype="bfloat16")
    assert placement_problems(model) == []
    router = next(m for m in model.target.modules() if type(m).__name__ == "Router")
    router.weight = nn.Parameter(router.weight.detach().to("meta"))
    said = placement_problems(model)
    assert len(said) == 1 and "on meta" in said[0] and "mlp.gate.weight" in said[0], said
