"""GLM-4.5 / GLM-4.5-Air / GLM-4.6 / GLM-4.7 targets (``model_type: glm4_moe``, transformers' Glm4MoeForCausalLM),
written by transformers itself (float32, the Hub's per-expert layout): q/k/v biases by ``attention_bias`` and none on
o_proj, per-head q/k norms where ``use_qk_norm``, the first ``partial_rotary_factor`` of each head rotated
(rotate_half on that part; the config's default 0.5), dense layers up to ``first_k_dense_replace`` then DeepSeek-V3's
router (sigmoid in float32, correction bias, groups, norm_topk_prob, routed_scaling_factor, shared experts). Each
gives transformers' logits (float32, 1e-5); the MTP layer the Hub's files hold (``model.layers.{L}``) is not read;
greedy speculative decoding with an EAGLE-3 draft (chain and tree) equals target-only; what draftsmith does not
compute is refused by name before any tensor is read."""
import json
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.assembler import load
from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends
from draftsmith.components.moe import SparseMoE
from draftsmith.components.targets import TARGETS, UnsupportedTarget
from draftsmith.registry import default_registry
from draftsmith.testing import SIZES, edit_config, randomize_correction_bias, write_eagle3, write_target
from draftsmith.testing.decoding import decodes_as_target_only
from test_phi3_target import echo_draft
from test_targets_zoo import paged_logits

ATOL = 1e-5
IDS = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))
GLM = dict(num_hidden_layers=3, num_key_value_heads=2, head_dim=16, first_k_dense_replace=1, n_routed_experts=8,
           num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1, moe_intermediate_size=32,
           routed_scaling_factor=2.5, norm_topk_prob=True, attention_bias=True, use_qk_norm=False)
CASES = {   # name: (write_target overrides, which layers are MoE)
    "glm-4.5-air (bias, half rotated)": ({}, [False, True, True]),
    "glm-4.6 (qk norm, 2 dense)": ({"use_qk_norm": True, "first_k_dense_replace": 2}, [False, False, True]),
    "no bias, unnormed, a quarter, 2 shared": ({"attention_bias": False, "norm_topk_prob": False, "n_shared_experts": 2,
                                                "partial_rotary_factor": 0.25, "routed_scaling_factor": 1.0},
                                               [False, True, True]),
    # no shared expert: transformers saves (and adds) a 0-wide shared MLP
    "whole heads, one group, none shared": ({"partial_rotary_factor": 1.0, "n_group": 1, "use_qk_norm": True,
                                             "first_k_dense_replace": 0, "num_experts_per_tok": 3,
                                             "n_shared_experts": 0}, [True, True, True]),
    # sliding_window: a key Glm4MoeModel does not read (every layer attends in full; IDS are 20 long)
    "odd width (0.3 of 16), 4 groups of 2": ({"partial_rotary_factor": 0.3, "n_group": 4, "topk_group": 2,
                                              "sliding_window": 4}, [False, True, True]),
}


def randomize_router(folder):
    """transformers starts e_score_correction_bias at zero: random here (testing.randomize_correction_bias)."""
    return randomize_correction_bias(folder)


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made = {}

    def get(name, layers=3):
        if (name, layers) not in made:
            folder = write_target(tmp_path_factory.mktemp("glm"), "glm4_moe", seed=1,
                                  **{**GLM, "num_hidden_layers": layers, **CASES[name][0]})
            made[name, layers] = randomize_router(folder)
        return made[name, layers]
    return get


def reference(folder, dtype=torch.float32):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, experts_implementation="eager").eval()
    with torch.no_grad():
        return model(IDS).logits, model


def ours(folder, dtype=torch.float32):
    model = load_target(folder, default_registry(), backends.sdpa, dtype=dtype, device="cpu")[0]
    with torch.no_grad():
        return model, model.logits(model(IDS, torch.arange(IDS.shape[1]).expand_as(IDS))[0])


def test_the_checkpoint_holds_glm_s_tensors(targets):
    names = set(load_file(str(targets("glm-4.6 (qk norm, 2 dense)") / "model.safetensors")))
    assert {"model.layers.2.mlp.gate.e_score_correction_bias", "model.layers.2.mlp.experts.7.up_proj.weight",
            "model.layers.2.mlp.shared_experts.down_proj.weight", "model.layers.1.mlp.gate_proj.weight",
            "model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.q_proj.bias"} <= names
    assert not any(".o_proj.bias" in n or "gate_up_proj" in n for n in names)


@pytest.mark.parametrize("name", sorted(CASES))
def test_glm4_moe_logits_match_transformers(targets, name):
    want = reference(targets(name))[0]
    model, got = ours(targets(name))
    assert want.std() > 0.1
    assert [type(layer.mlp) is SparseMoE for layer in model.model.layers] == CASES[name][1]
    gate = next(layer.mlp.gate for layer in model.model.layers if type(layer.mlp) is SparseMoE)
    assert gate.weight.dtype == gate.e_score_correction_bias.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["glm-4.6 (qk norm, 2 dense)", "odd width (0.3 of 16), 4 groups of 2"])
def test_paged_prefill_then_decode_matches_transformers(targets, name):
    want = reference(targets(name))[0][0]
    torch.testing.assert_close(paged_logits(ours(targets(name))[0], IDS[0]), want, atol=ATOL, rtol=0)


def test_each_moe_block_equals_transformers_at_float64(targets):
    folder = targets("glm-4.5-air (bias, half rotated)")
    theirs, (model, _) = reference(folder, torch.float64)[1], ours(folder, torch.float64)
    x = torch.randn(2, 20, 64, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        for i in (1, 2):
            torch.testing.assert_close(model.model.layers[i].mlp(x), theirs.model.layers[i].mlp(x), atol=1e-12,
                                       rtol=0)


def with_state(folder, out, change=None, **config):
    """A copy of a target folder, its config.json changed by ``config`` and its tensors by ``change``."""
    edit_config(folder, out, **config)
    if change is not None:
        state = load_file(str(out / "model.safetensors"))
        save_file(change(state), str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_each_part_of_glm_s_layer_matters(targets, tmp_path):
    """The same weights read without the correction bias, the group limit, the partial rotation, the q/k norms or
    the q/k/v biases give other logits: the parity above would see any one of them dropped."""
    folder = targets("glm-4.6 (qk norm, 2 dense)")
    got = ours(folder)[1]
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}

    def zeroed(suffix):
        return lambda state: {n: torch.zeros_like(t) if n.endswith(suffix) else t for n, t in state.items()}

    def unit(suffix):
        return lambda state: {n: torch.ones_like(t) if n.endswith(suffix) else t for n, t in state.items()}
    changed = {"bias": with_state(folder, tmp_path / "bias", zeroed("correction_bias")),
               "groups": with_state(folder, tmp_path / "groups", n_group=1, topk_group=1),
               "whole heads": with_state(folder, tmp_path / "whole", rope_parameters=rope),
               "q/k norms": with_state(folder, tmp_path / "norms", unit("_norm.weight")),
               "q/k/v biases": with_state(folder, tmp_path / "qkv", zeroed("_proj.bias"))}
    for name, other in changed.items():
        assert (ours(other)[1] - got).abs().max() > 1e-3, name


def test_the_hub_s_config_and_its_mtp_layer(targets, tmp_path):
    """As the Hub's config.json writes GLM-4.5 (rope_theta and partial_rotary_factor at the top level, no
    rope_parameters; num_nextn_predict_layers: 1) with its MTP layer's tensors under model.layers.{L}: transformers'
    logits, the MTP layer not read; without partial_rotary_factor the config's default (0.5) is both sides'."""
    folder = targets("glm-4.5-air (bias, half rotated)")
    state = load_file(str(folder / "model.safetensors"))
    L = 3
    mtp = {n.replace("model.layers.2.", f"model.layers.{L}."): t.clone() for n, t in state.items()
           if n.startswith("model.layers.2.")}
    mtp |= {f"model.layers.{L}.{n}.weight": torch.ones(64) for n in ("enorm", "hnorm", "shared_head.norm")}
    mtp |= {f"model.layers.{L}.eh_proj.weight": torch.zeros(64, 128),
            f"model.layers.{L}.embed_tokens.weight": state["model.embed_tokens.weight"].clone(),
            f"model.layers.{L}.shared_head.head.weight": state["lm_head.weight"].clone()}
    cfg = json.loads((folder / "config.json").read_text())
    hub = with_state(folder, tmp_path / "hub", lambda s: {**s, **mtp}, drop=["rope_parameters"], rope_scaling=None,
                     rope_theta=10000.0, partial_rotary_factor=0.5, num_nextn_predict_layers=1)
    assert cfg["num_nextn_predict_layers"] == 1 and "rope_parameters" not in json.loads(
        (hub / "config.json").read_text())
    want = reference(folder)[0]
    torch.testing.assert_close(ours(hub)[1], want, atol=ATOL, rtol=0)
    torch.testing.assert_close(reference(hub)[0], want, atol=ATOL, rtol=0)
    unstated = edit_config(hub, tmp_path / "unstated", drop=["partial_rotary_factor"])
    torch.testing.assert_close(ours(unstated)[1], want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["glm-4.5-air (bias, half rotated)", "glm-4.6 (qk norm, 2 dense)"])
def test_greedy_speculative_decoding_equals_target_only(targets, tmp_path, name):
    """A random EAGLE-3 draft (its proposals rejected), and one whose first proposal is the target's own next token
    (accepted nodes: their keys, rotated at their tree positions, are what later steps attend to)."""
    folder = targets(name, layers=4)
    draft = write_eagle3(tmp_path / "d", folder, aux_ids=[0, 1, 3])
    decodes_as_target_only(draftsmith.assemble("eagle3-llama", target=folder, draft=draft, dtype="float32"))
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=echo_draft(tmp_path / "e", folder),
                                dtype="float32")
    _, spec = decodes_as_target_only(model, [[1, 5, 9, 3, 4, 6], [7, 8]], max_new_tokens=24)
    assert sum(spec[0].stats.accepted_per_position) > 0   # drafted tokens were taken, not only the target's


def _glm(**keys):
    return SimpleNamespace(**{"model_type": "glm4_moe", "hidden_act": "silu", **SIZES,
                              "rope_parameters": {"partial_rotary_factor": 0.5}, **GLM, **keys})


REFUSED = {   # name: (config changes, what the refusal says)
    "gelu experts": ({"hidden_act": "gelu"}, "hidden_act='gelu' in its mixture-of-experts layers"),
    "groups that do not divide": ({"n_group": 3}, "n_group=3 in its mixture-of-experts layers"),
    "groups of one expert": ({"n_group": 8}, "n_group=8 in its mixture-of-experts layers"),
    "more groups kept than there are": ({"topk_group": 3}, "topk_group=3 in its mixture-of-experts layers"),
    "more experts than the groups hold": ({"num_experts_per_tok": 5}, "num_experts_per_tok=5 in its mixture"),
    "no dense count": ({"first_k_dense_replace": None}, "first_k_dense_replace=None does not say which layers"),
    "no expert width": ({"moe_intermediate_size": 0}, "moe_intermediate_size=0 in its mixture-of-experts layers"),
    "rotation past the head": ({"rope_parameters": {"partial_rotary_factor": 1.5}}, "partial_rotary_factor is 1.5"),
    "no channel rotated": ({"rope_parameters": {"partial_rotary_factor": 0.05}},
                           "partial_rotary_factor 0.05 of a head of 16 rotates 0 channels"),
    "hyper-connections": ({"hc_mult": 4}, "hc_mult=4 asks for hyper-connections"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_draftsmith_does_not_compute_is_refused_by_name(name):
    changes, said = REFUSED[name]
    with pytest.raises(UnsupportedTarget) as err:
        TARGETS["glm4_moe"]().check(_glm(**changes))
    assert str(err.value).startswith(f"config.json: glm4_moe target: {said}"), str(err.value)
    assert "Fix: " in str(err.value)


def test_a_refused_config_is_said_naming_its_file_before_any_tensor_is_read(targets, tmp_path, monkeypatch):
    folder = edit_config(targets("glm-4.5-air (bias, half rotated)"), tmp_path / "t", n_group=3)
    monkeypatch.setattr(load, "read_tensors", lambda *a, **k: pytest.fail("tensors read"))
    with pytest.raises(UnsupportedTarget) as err:
        ours(folder)
    assert str(err.value).startswith(f"{folder / 'config.json'}: glm4_moe target: n_group=3 in its "
                                     "mixture-of-experts layers"), str(err.value)


def test_glm_s_record_reads_its_keys():
    arch = TARGETS["glm4_moe"]()
    assert arch.attention_recipe() == ("gqa", {"qk_norm": "config", "o_bias": False, "partial_rotary": True})
    assert arch.moe_layers(_glm(first_k_dense_replace=3, num_hidden_layers=5)) == [3, 4]
    assert arch.window(SimpleNamespace(sliding_window=4, layer_types=["sliding_attention"]), 0) is None
    assert {"n_routed_experts", "n_shared_experts", "routed_scaling_factor", "n_group", "topk_group",
            "norm_topk_prob", "first_k_dense_replace"} <= arch.moe_keys()
    arch.check(_glm(first_k_dense_replace=3, hidden_act="gelu"))   # all dense: no router to check
