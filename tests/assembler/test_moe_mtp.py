"""DeepSeek-V3's own MTP layer on a mixture-of-experts target (spec deepseek-mtp, ``draft.moe: as_target``): the
layer continues the target's stack at index L = num_hidden_layers, so its MLP is the target's MoE where L is past
first_k_dense_replace (as vLLM's deepseek_mtp.py and SGLang's deepseek_nextn.py build it), dense below. Its block is
the one transformers' own save wrote for a model one layer deeper; the MoE block and the whole MTP layer equal
transformers' (DeepseekV3MoE, MtpLayer), and greedy speculative decoding equals target-only."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (DeepseekV3DecoderLayer, DeepseekV3RMSNorm,
                                                                    DeepseekV3RotaryEmbedding)

import draftsmith
from draftsmith.components.mlp import SwiGLU
from draftsmith.components.moe import SparseMoE
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.testing import edit_config, write_target
from draftsmith.testing.mla import MLA_SIZES
from draftsmith.testing.mtp import mtp_reference, write_mtp

L = 2   # the target's layers; the MTP layer is model.layers.2
MOE = dict(num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, n_group=2, topk_group=1,
           n_shared_experts=1, moe_intermediate_size=32, routed_scaling_factor=2.5, norm_topk_prob=True, **MLA_SIZES)
PROMPTS = [[1, 2, 3, 4, 5, 6], [7, 8]]


def write_moe_mtp(folder, first_k: int):
    """transformers saves a deepseek_v3 of L + 1 layers (layer L in the Hub's per-expert names where it is MoE, a
    random correction bias), the config then says L layers and one MTP layer: layer L's block is the MTP's."""
    write_target(folder, "deepseek_v3", seed=1, num_hidden_layers=L + 1, first_k_dense_replace=first_k, **MOE)
    path = folder / "model.safetensors"
    state, g = load_file(str(path)), torch.Generator().manual_seed(7)
    for name in [n for n in state if n.endswith("e_score_correction_bias")]:
        state[name] = torch.randn(state[name].shape, generator=g) * 0.3
    save_file(state, str(path), metadata={"format": "pt"})
    edit_config(folder, num_hidden_layers=L)
    return write_mtp(folder, block_from=L)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    made = {}

    def get(first_k):
        if first_k not in made:
            made[first_k] = write_moe_mtp(tmp_path_factory.mktemp(f"first{first_k}"), first_k)
        return made[first_k]
    return get


def assemble(folder, dtype="float32"):
    return draftsmith.assemble("deepseek-mtp", target=folder, draft=folder, dtype=dtype)


# first_k_dense_replace: 1 (target layer 1 and the MTP layer MoE), 2 (the target dense, its MTP layer MoE),
# 3 (all dense: the MTP layer's dense SwiGLU, as before)
@pytest.mark.parametrize("first_k, target, draft", [(1, [SwiGLU, SparseMoE], SparseMoE),
                                                    (2, [SwiGLU, SwiGLU], SparseMoE), (3, [SwiGLU, SwiGLU], SwiGLU)])
def test_the_mtp_layer_s_mlp_is_what_the_target_s_type_makes_layer_l(folders, first_k, target, draft):
    folder = folders(first_k)
    names = set(load_file(str(folder / "model.safetensors")))
    assert (f"model.layers.{L}.mlp.experts.3.down_proj.weight" in names) == (draft is SparseMoE)
    model = assemble(folder)
    assert [type(layer.mlp) for layer in model.target.model.layers] == target
    assert type(model.draft.layers[0].mlp) is draft
    held = {n.removeprefix(f"model.layers.{L}.") for n in names if n.startswith(f"model.layers.{L}.mlp.")}
    assert {n.removeprefix("layers.0.") for n in model.draft.state_dict() if ".mlp." in n} == held
    if draft is SparseMoE:   # the router's tensors kept in float32, as the target's
        assert model.draft.layers[0].mlp.gate.weight.dtype == torch.float32


def reference(folder, dtype):
    """transformers' MtpLayer around DeepseekV3DecoderLayer (testing.mtp.mtp_reference)."""
    return mtp_reference(folder, dtype, DeepseekV3DecoderLayer, DeepseekV3RMSNorm)


@pytest.mark.parametrize("dtype, layer_atol", [(torch.float64, 5e-6), (torch.float32, 1e-5)])
def test_the_moe_block_and_the_mtp_layer_equal_transformers(folders, dtype, layer_atol):
    folder = folders(1)
    model = assemble(folder, str(dtype).removeprefix("torch."))
    ref, tcfg = reference(folder, dtype)
    x = torch.randn(2, 9, 64, generator=torch.Generator().manual_seed(3), dtype=dtype)
    with torch.no_grad():   # the MoE block alone: float64 rounding (transformers' DeepseekV3MoE)
        block = model.draft.layers[0].mlp(x)
        torch.testing.assert_close(block, ref.mtp_block.mlp(x), atol=1e-12 if dtype == torch.float64 else 1e-6,
                                   rtol=0)
    ids = torch.randint(0, 96, (2, 9), generator=torch.Generator().manual_seed(0))
    hidden = torch.randn(2, 9, 64, generator=torch.Generator().manual_seed(1), dtype=dtype)
    pos = torch.arange(9).expand(2, 9)
    emb = model.draft.embed_tokens(ids)
    mask = torch.full((9, 9), float("-inf"), dtype=dtype).triu(1)[None, None]
    with torch.no_grad():   # transformers' layer has no position-0 zeroing: ours is switched off; its rotation is
        want = ref(emb, hidden, DeepseekV3RotaryEmbedding(tcfg)(emb, pos), mask, pos, None)   # float32's
        model.draft.fc.zero_first_embedding = False
        got = model.draft.norm(model.draft(ids, hidden, pos, embed=model.draft.embed_tokens, from_target=True)[0])
    assert want.std() > 0.5
    torch.testing.assert_close(got, want, atol=layer_atol, rtol=0)


@pytest.mark.parametrize("first_k", [1, 2])
def test_greedy_speculative_decoding_equals_target_only(folders, first_k):
    model = assemble(folders(first_k))
    base = model.generate_baseline(PROMPTS, max_new_tokens=12, stop=[])
    for shape in (dict(topk=1, steps=3), dict(topk=3, steps=3, draft_tokens=7)):
        out = model.generate(PROMPTS, max_new_tokens=12, stop=[], **shape)
        assert [o.token_ids for o in out] == [b.token_ids for b in base], shape


def test_a_router_option_not_computed_is_refused_for_the_mtp_layer_alone(folders, tmp_path):
    # the target's layers are all dense (no router checked for them); its MoE MTP layer's router is checked
    folder = edit_config(folders(2), tmp_path / "softmax", scoring_func="softmax")
    with pytest.raises(UnsupportedTarget, match="scoring_func='softmax'"):
        assemble(folder)


def test_inspect_does_not_call_the_mixture_of_experts_keys_unread(folders):
    # an MTP folder is a whole model: its type's MoE keys are read (by the target and the draft's as_target layer)
    from draftsmith.convert.inspect import inspect_checkpoint

    folder = folders(1)
    found = inspect_checkpoint(folder)
    moe = {"n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size", "n_group",
           "topk_group", "routed_scaling_factor", "norm_topk_prob", "first_k_dense_replace"}
    assert moe <= set(json.loads((folder / "config.json").read_text())), "the config states them"
    assert not moe & set(found.unread), found.unread
    assert "num_nextn_predict_layers" not in found.unread, "the mtp fusion reads it (its layer count)"


def test_deepseek_mtp_holds_the_mtp_layer_s_experts(folders):
    # draft.moe: as_target: its router, experts and shared experts are names the family places (the scoring of
    # families inspect offers an unknown layout counts them as fitting, not as names no rule reads)
    from draftsmith.assembler.checkpoint import list_tensors
    from draftsmith.assembler.fit import unfit_names

    folder = folders(1)
    names = [n for n in list_tensors(folder) if n.startswith(f"model.layers.{L}.mlp.")]
    assert any(".experts." in n for n in names) and any("shared_experts" in n for n in names), names
    assert unfit_names("deepseek-mtp", json.loads((folder / "config.json").read_text()), names) == []
