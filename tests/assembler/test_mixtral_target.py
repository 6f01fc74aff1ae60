"""Mixtral targets (``model_type: mixtral``): every layer's MLP is a softmax top-k mixture of experts (the chosen
weights renormalised) under Mixtral's own names (``block_sparse_moe.gate``, ``experts.E.w1/w3/w2``: gate, up,
down), read through the type's renames (TargetArch.names); a sliding_window applies to every layer. The logits equal
transformers' for a tiny random Mixtral its save_pretrained wrote, and greedy speculative decoding through an EAGLE-3
draft equals target-only."""
import pytest
import torch
from safetensors.torch import load_file, save_file
from draftsmith.testing.decoding import decodes_as_target_only
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.assembler.assemble import load_target, plan_target
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components import backends
from draftsmith.components.moe import SparseMoE
from draftsmith.components.targets import TARGETS, UnsupportedTarget
from draftsmith.registry import default_registry
from draftsmith.testing import edit_config, write_eagle3, write_target

MIXTRAL = dict(num_hidden_layers=3, num_local_experts=4, num_experts_per_tok=2, intermediate_size=32)
CASES = {"mixtral": {}, "mixtral-window4": {"sliding_window": 4}}   # IDS are 20 long
IDS = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            made[name] = write_target(tmp_path_factory.mktemp(name), "mixtral", seed=2, **MIXTRAL, **CASES[name])
        return made[name]
    return get


def ours(folder, dtype):
    model = load_target(folder, default_registry(), backends.sdpa, dtype=dtype, device="cpu")[0]
    with torch.no_grad():
        return model, model.logits(model(IDS, torch.arange(IDS.shape[1]).expand_as(IDS))[0])


def test_transformers_writes_mixtral_s_own_names(folders):
    names = set(load_file(str(folders("mixtral") / "model.safetensors")))
    for n in ("gate.weight", "experts.3.w1.weight", "experts.3.w2.weight", "experts.3.w3.weight"):
        assert f"model.layers.2.block_sparse_moe.{n}" in names
    assert not any(".mlp." in n for n in names)


# float64 end to end: transformers rotates in float32 whatever the dtype (~1e-6), as for the other types
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_mixtral_logits_and_blocks_match_transformers(folders, name, dtype):
    theirs = AutoModelForCausalLM.from_pretrained(folders(name), dtype=dtype, experts_implementation="eager").eval()
    model, got = ours(folders(name), dtype)
    with torch.no_grad():
        want = theirs(IDS).logits
    assert want.std() > 0.1 and got.dtype == dtype
    assert all(type(layer.mlp) is SparseMoE for layer in model.model.layers)
    windowed = [layer.self_attn.backend is not backends.sdpa for layer in model.model.layers]
    assert windowed == [name == "mixtral-window4"] * 3
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    x = torch.randn(2, 20, 64, generator=torch.Generator().manual_seed(3), dtype=dtype)
    with torch.no_grad():   # each MoE block alone: to the dtype's rounding
        for ours_, theirs_ in zip(model.model.layers, theirs.model.layers):
            torch.testing.assert_close(ours_.mlp(x), theirs_.mlp(x), atol=1e-12 if dtype == torch.float64 else 1e-6,
                                       rtol=0)


def test_the_window_matters_here(folders):
    plain, window = ours(folders("mixtral"), torch.float64)[1], ours(folders("mixtral-window4"), torch.float64)[1]
    assert (plain - window).abs().max() > 1e-3   # the same weights (seed): only the window differs


@pytest.mark.parametrize("name", sorted(CASES))
def test_greedy_speculative_decoding_through_a_mixtral_target_equals_target_only(folders, name, tmp_path):
    target = folders(name)
    model = draftsmith.assemble("eagle3-llama", target=target, dtype="float32",
                                draft=write_eagle3(tmp_path / "d", target, aux_ids=[0, 1, 2]))
    decodes_as_target_only(model)


def test_a_missing_expert_is_named_in_the_checkpoint_s_own_names(folders, tmp_path):
    (tmp_path / "config.json").write_text((folders("mixtral") / "config.json").read_text())
    state = load_file(str(folders("mixtral") / "model.safetensors"))
    del state["model.layers.1.block_sparse_moe.experts.3.w2.weight"]
    save_file(state, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointMismatch, match=r"model\.layers\.1\.block_sparse_moe\.experts\.3\.w2\.weight"):
        plan_target(tmp_path, default_registry(), backends.sdpa)


@pytest.mark.parametrize("key, value", [("num_experts_per_tok", 5), ("num_local_experts", 0)])
def test_router_sizes_not_computed_are_refused_by_name(folders, tmp_path, key, value):
    folder = edit_config(folders("mixtral"), tmp_path / key, **{key: value})
    with pytest.raises(UnsupportedTarget, match=f"{key}={value} in its mixture-of-experts layers"):
        plan_target(folder, default_registry(), backends.sdpa)


def test_mixtral_s_renames_go_both_ways():
    from draftsmith.components.weights import RegexRule
    rules = [RegexRule(**rule) for rule in TARGETS["mixtral"]().name_rules()]
    pairs = {"model.layers.12.block_sparse_moe.gate.weight": "model.layers.12.mlp.gate.weight",
             "model.layers.0.block_sparse_moe.experts.7.w1.weight": "model.layers.0.mlp.experts.7.gate_proj.weight",
             "model.layers.3.block_sparse_moe.experts.10.w3.weight_scale_inv":
                 "model.layers.3.mlp.experts.10.up_proj.weight_scale_inv",
             "model.layers.3.block_sparse_moe.experts.0.w2.weight": "model.layers.3.mlp.experts.0.down_proj.weight"}
    for stored, model in pairs.items():
        assert [r.apply(stored) for r in rules if r.apply(stored)] == [model]
        assert [r.invert(model) for r in rules if r.invert(model)] == [stored]
    assert not any(r.apply("model.layers.0.mlp.gate_proj.weight") for r in rules)
