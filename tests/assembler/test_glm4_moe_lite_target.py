"""GLM-4.7-Flash targets (``model_type: glm4_moe_lite``, transformers' Glm4MoeLiteForCausalLM), written by
transformers itself (float32, the Hub's per-expert layout): DeepSeek-V3's latent attention and router, the MoE layers
those ``mlp_layer_types`` names ``sparse``. Each gives transformers' logits (float32, 1e-5); the MTP layer the Hub's
files hold (``model.layers.{L}``) is not read; greedy speculative decoding with an EAGLE-3 draft (chain and tree)
equals target-only; a layer list draftsmith cannot read, or one first_k_dense_replace contradicts, is refused by name
before any tensor is read."""
import json
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends
from draftsmith.components.moe import SparseMoE
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.registry import default_registry
from draftsmith.testing import edit_config, randomize_correction_bias, write_eagle3, write_target
from draftsmith.testing.decoding import decodes_as_target_only
from draftsmith.testing.mla import MLA_SIZES

ATOL = 1e-5
IDS = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))
LITE = dict(num_key_value_heads=4, num_hidden_layers=4, n_routed_experts=8, num_experts_per_tok=2, n_group=2,
            topk_group=1, n_shared_experts=1, moe_intermediate_size=32, routed_scaling_factor=1.8,
            norm_topk_prob=True, **MLA_SIZES)
CASES = {   # name: (write_target overrides, which layers are MoE)
    "default (all but the first)": ({}, [False, True, True, True]),
    "dense / sparse alternating": ({"mlp_layer_types": ["dense", "sparse", "dense", "sparse"]},
                                   [False, True, False, True]),
    "no q lora, unnormed, one group": ({"q_lora_rank": None, "norm_topk_prob": False, "n_group": 1,
                                        "mlp_layer_types": ["sparse"] * 4}, [True, True, True, True]),
    "tied, two shared, first_k agreeing": ({"tie_word_embeddings": True, "n_shared_experts": 2,
                                            "first_k_dense_replace": 2,
                                            "mlp_layer_types": ["dense", "dense", "sparse", "sparse"]},
                                           [False, False, True, True]),
}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            over = {**LITE, **CASES[name][0]}
            folder = write_target(tmp_path_factory.mktemp("lite"), "glm4_moe_lite", seed=1, **over)
            made[name] = randomize_correction_bias(folder)
        return made[name]
    return get


def ours(folder):
    model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]
    with torch.no_grad():
        return model, model.logits(model(IDS, torch.arange(IDS.shape[1]).expand_as(IDS))[0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_logits_match_transformers_glm4_moe_lite(targets, name):
    folder = targets(name)
    theirs = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, experts_implementation="eager").eval()
    with torch.no_grad():
        want = theirs(IDS).logits
    model, got = ours(folder)
    assert [isinstance(layer.mlp, SparseMoE) for layer in model.model.layers] == CASES[name][1]
    assert (got - want).abs().max().item() < ATOL


def test_the_mtp_layer_the_hub_s_files_hold_is_not_read(targets, tmp_path):
    folder = tmp_path / "t"
    shutil.copytree(targets("default (all but the first)"), folder)
    tensors = load_file(folder / "model.safetensors")
    tensors |= {n.replace("model.layers.3.", "model.layers.4."): t.clone() for n, t in tensors.items()
                if n.startswith("model.layers.3.")}
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    edit_config(folder, num_nextn_predict_layers=1)
    assert torch.equal(ours(folder)[1], ours(targets("default (all but the first)"))[1])


def test_greedy_speculative_decoding_equals_target_only(tmp_path):
    """8 layers, where eagle3-llama's default taps are distinct; chain and tree (decodes_as_target_only)."""
    target = randomize_correction_bias(write_target(tmp_path / "t", "glm4_moe_lite", seed=1, **{
        **LITE, "num_hidden_layers": 8, "mlp_layer_types": ["dense", "sparse"] * 4}))
    model = draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "d", target),
                                dtype="float32")
    decodes_as_target_only(model)


@pytest.mark.parametrize("types, said", [
    (["dense", "sparse", "sparse"], re.escape("mlp_layer_types=['dense', 'sparse', 'sparse'] does not say")),
    (["dense", "moe", "sparse", "sparse"],
     re.escape("a list of 4 entries (num_hidden_layers), each 'dense' or 'sparse'")),
    ("sparse", "transformers cannot read it(?s:.*)mlp_layer_types"),   # its config class refuses a string first
])
def test_a_layer_list_draftsmith_cannot_read_is_refused_before_any_tensor(targets, tmp_path, types, said):
    cfg = json.loads((targets("default (all but the first)") / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "mlp_layer_types": types}))
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises((UnsupportedTarget, ValueError), match=said):
        ours(tmp_path)


def test_first_k_dense_replace_naming_other_moe_layers_is_refused(targets, tmp_path):
    """transformers reads mlp_layer_types and vLLM first_k_dense_replace: where they differ no reading is sure."""
    cfg = json.loads((targets("dense / sparse alternating") / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "first_k_dense_replace": 1}))
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(UnsupportedTarget, match=f"{tmp_path}/config.json: (?s:.*)first_k_dense_replace=1 and "
                                                "mlp_layer_types name different MoE layers"):
        ours(tmp_path)
