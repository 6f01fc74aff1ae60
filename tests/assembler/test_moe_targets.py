"""Mixture-of-experts targets (``moe: sparse``): a tiny DeepSeek-V3 whose layers from first_k_dense_replace on are MoE
(sigmoid router, correction bias, group-limited top-k, a shared expert), saved in the Hub's per-expert layout,
gives transformers' logits (float64 and float32) and decodes greedily through an EAGLE-3 draft equal to target-only;
router options draftsmith does not compute are refused with the reason."""
import json
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.assembler.assemble import load_target, plan_target
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components import backends
from draftsmith.components.moe import SparseMoE
from draftsmith.components.targets import TARGETS, UnsupportedTarget
from draftsmith.registry import default_registry
from draftsmith.testing import randomize_correction_bias, write_eagle3, write_target
from draftsmith.testing.decoding import decodes_as_target_only
from draftsmith.testing.mla import MLA_SIZES

MOE = dict(num_key_value_heads=4, num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=4,
           num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1, moe_intermediate_size=32,
           routed_scaling_factor=2.5, norm_topk_prob=True, **MLA_SIZES)
IDS = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))


def write_moe(folder, **over):
    """transformers' own save (it writes the per-expert names the Hub's checkpoints hold), with a random
    e_score_correction_bias (transformers starts it at zero, where it would choose nothing)."""
    return randomize_correction_bias(write_target(folder, "deepseek_v3", seed=1, **{**MOE, **over}))


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    return write_moe(tmp_path_factory.mktemp("moe"))


def reference(folder, dtype):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, experts_implementation="eager").eval()
    with torch.no_grad():
        return model(IDS).logits, model


def ours(folder, dtype):
    model = load_target(folder, default_registry(), backends.sdpa, dtype=dtype, device="cpu")[0]
    with torch.no_grad():
        return model, model.logits(model(IDS, torch.arange(IDS.shape[1]).expand_as(IDS))[0])


def test_the_checkpoint_is_in_the_hub_per_expert_layout(moe):
    names = set(load_file(str(moe / "model.safetensors")))
    for n in ("gate.weight", "gate.e_score_correction_bias", "experts.3.down_proj.weight",
              "shared_experts.up_proj.weight"):
        assert f"model.layers.2.mlp.{n}" in names
    assert "model.layers.0.mlp.gate_proj.weight" in names and not any("gate_up_proj" in n for n in names)


# float64 end to end differs by ~2e-6 in a dense DeepSeek-V3 too: transformers rotates in float32 whatever the dtype
@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-5), (torch.float32, 1e-5)])
def test_moe_deepseek_logits_match_transformers(moe, dtype, atol):
    want = reference(moe, dtype)[0]
    model, got = ours(moe, dtype)
    assert want.std() > 0.1 and got.dtype == dtype
    assert [type(layer.mlp) is SparseMoE for layer in model.model.layers] == [False, True, True]
    gate = model.model.layers[1].mlp.gate
    assert gate.weight.dtype == gate.e_score_correction_bias.dtype == torch.float32   # as transformers keeps them
    torch.testing.assert_close(got, want, atol=atol, rtol=0)


def test_each_moe_block_equals_transformers_at_float64(moe):
    """The MoE block alone, on the same float64 input: transformers' DeepseekV3MoE, to float64 rounding."""
    theirs, (model, _) = reference(moe, torch.float64)[1], ours(moe, torch.float64)
    x = torch.randn(2, 20, 64, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        for i in (1, 2):
            want, got = theirs.model.layers[i].mlp(x), model.model.layers[i].mlp(x)
            assert want.dtype == got.dtype == torch.float64
            torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


def test_a_cuda_graph_s_every_expert_path_equals_the_chosen_experts_path(moe):
    model = ours(moe, torch.float64)[0]
    x = torch.randn(40, 64, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    block = model.model.layers[2].mlp
    with torch.no_grad():
        weights = block.gate(x)
        assert (weights.ne(0).sum(1) == 2).all() and weights.ne(0).any(0).all()   # top-2, every expert chosen
        torch.testing.assert_close(block.every_expert(x, weights), block.chosen_experts(x, weights), atol=1e-13,
                                   rtol=0)


def test_the_router_s_parts_matter(moe, tmp_path):
    """The correction bias and the group limit change which experts are chosen here: without them (the bias at
    zero; one group) the logits differ, so the parity above sees both."""
    want = ours(moe, torch.float64)[1]
    for name, change in (("bias", None), ("groups", {"n_group": 1, "topk_group": 1})):
        folder = tmp_path / name
        folder.mkdir()
        cfg = json.loads((moe / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**cfg, **(change or {})}))
        state = load_file(str(moe / "model.safetensors"))
        if change is None:
            state = {n: torch.zeros_like(t) if n.endswith("correction_bias") else t for n, t in state.items()}
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        assert (ours(folder, torch.float64)[1] - want).abs().max() > 1e-3, name


QWEN = dict(num_hidden_layers=3, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16)
QWENS = {  # name: (overrides, which layers are MoE)
    "qwen3_moe-mlp-only-0-norm": ({"mlp_only_layers": [0], "norm_topk_prob": True}, [False, True, True]),
    "qwen3_moe-step-2": ({"decoder_sparse_step": 2, "norm_topk_prob": False}, [False, True, False]),
    # its window on every layer (use_sliding_window; IDS are 20 long)
    "qwen3_moe-window4": ({"use_sliding_window": True, "sliding_window": 4, "norm_topk_prob": True}, [True] * 3),
}


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            made[name] = write_target(tmp_path_factory.mktemp(name), "qwen3_moe", seed=2, **QWEN, **QWENS[name][0])
        return made[name]
    return get


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", sorted(QWENS))
def test_moe_qwen3_logits_and_blocks_match_transformers(qwen, name, dtype):
    (want, theirs), (model, got) = reference(qwen(name), dtype), ours(qwen(name), dtype)
    assert want.std() > 0.1 and got.dtype == dtype
    assert [type(layer.mlp) is SparseMoE for layer in model.model.layers] == QWENS[name][1]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)   # float64: transformers' float32 rotation, as above
    x = torch.randn(2, 20, 64, generator=torch.Generator().manual_seed(3), dtype=dtype)
    with torch.no_grad():
        for i in [i for i, sparse in enumerate(QWENS[name][1]) if sparse]:
            torch.testing.assert_close(model.model.layers[i].mlp(x), theirs.model.layers[i].mlp(x),
                                       atol=1e-12 if dtype == torch.float64 else 1e-6, rtol=0)


@pytest.mark.parametrize("which", ["deepseek_v3", "qwen3_moe-mlp-only-0-norm"])
def test_greedy_speculative_decoding_through_a_moe_target_equals_target_only(moe, qwen, which, tmp_path):
    target = moe if which == "deepseek_v3" else qwen(which)
    model = draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "d", target),
                                dtype="float32")
    decodes_as_target_only(model)


def test_a_missing_expert_is_named_before_any_tensor_is_read(moe, tmp_path):
    (tmp_path / "config.json").write_text((moe / "config.json").read_text())
    state = load_file(str(moe / "model.safetensors"))
    del state["model.layers.2.mlp.experts.3.down_proj.weight"]
    save_file(state, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointMismatch, match=r"model\.layers\.2\.mlp\.experts\.3\.down_proj\.weight"):
        plan_target(tmp_path, default_registry(), backends.sdpa)


def _deepseek(**keys):
    return SimpleNamespace(model_type="deepseek_v3", **{**MOE, "hidden_act": "silu", **keys})


@pytest.mark.parametrize("keys, found", [
    ({"topk_method": "greedy"}, "topk_method='greedy'"), ({"scoring_func": "softmax"}, "scoring_func='softmax'"),
    ({"moe_layer_freq": 2}, "moe_layer_freq=2"), ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
    ({"n_group": 3}, "n_group=3"), ({"n_group": 4}, "n_group=4"), ({"topk_group": 3}, "topk_group=3"),
    ({"num_experts_per_tok": 3}, "num_experts_per_tok=3"), ({"moe_intermediate_size": None}, "size=None"),
    ({"first_k_dense_replace": None}, "first_k_dense_replace=None"), ({"n_group": True}, "n_group=True"),
    ({"topk_group": True}, "topk_group=True")])
def test_router_options_not_computed_are_refused(keys, found):
    with pytest.raises(UnsupportedTarget, match=found):
        TARGETS["deepseek_v3"]().check(_deepseek(**keys))


def test_deepseek_s_own_router_keys_load_at_the_values_computed():
    arch = TARGETS["deepseek_v3"]()
    arch.check(_deepseek(topk_method="noaux_tc", scoring_func="sigmoid", moe_layer_freq=1))
    assert arch.moe_layers(_deepseek()) == [1, 2] and arch.moe_layers(_deepseek(first_k_dense_replace=3)) == []
    arch.check(_deepseek(first_k_dense_replace=3, scoring_func="softmax"))   # all dense: no router to check


@pytest.mark.parametrize("name", ["qwen3_moe-step-2", "qwen3_moe-window4"])
def test_moe_qwen3_blocks_equal_transformers_bit_for_bit_in_bfloat16(qwen, name):
    # Qwen3-MoE casts the chosen weights to the hidden dtype before the product (weights_in_hidden_dtype): in
    # float32 either order rounds alike, in bfloat16 only transformers' order gives its bits
    (_, theirs), (model, _) = reference(qwen(name), torch.bfloat16), ours(qwen(name), torch.bfloat16)
    x = torch.randn(2, 20, 64, generator=torch.Generator().manual_seed(5), dtype=torch.bfloat16)
    with torch.no_grad():
        for i in [i for i, sparse in enumerate(QWENS[name][1]) if sparse]:
            assert torch.equal(model.model.layers[i].mlp(x), theirs.model.layers[i].mlp(x)), i
