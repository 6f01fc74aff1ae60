"""gpt-oss targets (``model_type: gpt_oss``, the bf16 layout transformers saves): q/k/v/o biases, learned attention
sinks (``attention: gqa`` with ``sinks: true``), sliding and full layers by ``layer_types``, yarn rope, and every
layer a mixture of experts held as stacked tensors with biases (``moe: stacked``: top-k router logits then their
softmax, gate / up interleaved in a clamped SwiGLU). A tiny one written by transformers' save_pretrained gives
transformers' logits (its eager attention and experts), each block alone too, and greedy speculative decoding
through an EAGLE-3 draft equals target-only; the MXFP4 layout and sizes not computed are refused with the reason."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from draftsmith.testing.decoding import decodes_as_target_only
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.assembler.assemble import load_target, plan_target
from draftsmith.components import backends
from draftsmith.components.stacked_moe import StackedMoE
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.registry import default_registry
from draftsmith.testing import edit_config, write_eagle3, write_target

# the window (4) shorter than IDS (20); a clamp (1.0) the experts' gate and up pass often; yarn consistent with the
# toy's 512 positions (16 x 32)
YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 16, "rope_theta": 150000.0}
GPT_OSS = dict(num_hidden_layers=3, num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16,
               sliding_window=4, swiglu_limit=1.0, rope_parameters=YARN)
IDS = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """transformers' own save, with sinks of either sign and a few units large (its initial ones are near 0)."""
    folder = write_target(tmp_path_factory.mktemp("gpt_oss"), "gpt_oss", seed=2, **GPT_OSS)
    path = folder / "model.safetensors"
    state = load_file(str(path))
    g = torch.Generator().manual_seed(7)
    for name in [n for n in state if n.endswith("self_attn.sinks")]:
        state[name] = torch.randn(state[name].shape, generator=g) * 2
    save_file(state, str(path), metadata={"format": "pt"})
    return folder


def reference(folder, dtype):
    return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, experts_implementation="eager",
                                                attn_implementation="eager").eval()


def ours(folder, dtype, backend=backends.sdpa):
    model = load_target(folder, default_registry(), backend, dtype=dtype, device="cpu")[0]
    with torch.no_grad():
        return model, model.logits(model(IDS, torch.arange(IDS.shape[1]).expand_as(IDS))[0])


def test_the_checkpoint_is_transformers_stacked_bf16_layout(target):
    shapes = {n: tuple(t.shape) for n, t in load_file(str(target / "model.safetensors")).items()}
    layer = "model.layers.1."
    assert shapes[layer + "mlp.experts.gate_up_proj"] == (4, 64, 64)   # [experts, hidden, 2 x intermediate]
    assert shapes[layer + "mlp.experts.down_proj"] == (4, 32, 64)      # [experts, intermediate, hidden]
    assert shapes[layer + "mlp.experts.gate_up_proj_bias"] == (4, 64) and shapes[layer + "mlp.router.bias"] == (4,)
    assert shapes[layer + "self_attn.sinks"] == (4,) and layer + "self_attn.o_proj.bias" in shapes
    cfg = json.loads((target / "config.json").read_text())
    assert cfg["layer_types"] == ["sliding_attention", "full_attention", "sliding_attention"]


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-5), (torch.float32, 1e-5)])
@pytest.mark.parametrize("backend", ["sdpa", "eager", "flex"])
def test_gpt_oss_logits_match_transformers(target, dtype, atol, backend):
    if backend == "flex" and dtype == torch.float64:
        pytest.skip("FlexAttention's CPU reference: float32 is enough to see its sinks")
    with torch.no_grad():
        want = reference(target, dtype)(IDS).logits
    model, got = ours(target, dtype, getattr(backends, backend))
    assert want.std() > 0.1 and got.dtype == dtype
    assert all(type(layer.mlp) is StackedMoE for layer in model.model.layers)
    windows = [getattr(layer.self_attn.backend, "window", None) for layer in model.model.layers]
    assert windows == [4, None, 4]
    torch.testing.assert_close(got, want, atol=atol, rtol=0)


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_each_block_equals_transformers(target, dtype, atol):
    """Each MoE block and each attention alone, on the same input: transformers' GptOssMLP and GptOssAttention."""
    theirs, model = reference(target, dtype), ours(target, dtype)[0]
    x = torch.randn(2, 20, 64, generator=torch.Generator().manual_seed(3), dtype=dtype) * 2
    pos = torch.arange(20).expand(2, 20)
    with torch.no_grad():
        rotary = theirs.model.rotary_emb(x, pos)
        for i, (mine, their) in enumerate(zip(model.model.layers, theirs.model.layers)):
            torch.testing.assert_close(mine.mlp(x), their.mlp(x)[0], atol=atol, rtol=0)
            mask = torch.ones(20, 20, dtype=torch.bool).tril()
            if i != 1:   # the sliding layers: the last 4 positions
                mask &= ~torch.ones(20, 20, dtype=torch.bool).tril(-4)
            additive = torch.zeros(1, 1, 20, 20, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)
            want = their.self_attn(x, rotary, additive)[0]
            torch.testing.assert_close(mine.self_attn(x, pos), want, atol=atol * 10, rtol=0)


def test_a_cuda_graph_s_every_expert_path_equals_the_chosen_experts_path(target):
    experts, router = (lambda mlp: (mlp.experts, mlp.router))(ours(target, torch.float64)[0].model.layers[2].mlp)
    x = torch.randn(40, 64, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    with torch.no_grad():
        weights = router(x)
        assert (weights.ne(0).sum(1) == 2).all() and weights.ne(0).any(0).all()   # top-2, every expert chosen
        torch.testing.assert_close(experts.every_expert(x, weights), experts.chosen_experts(x, weights), atol=1e-13,
                                   rtol=0)


def test_the_sinks_clamp_and_interleave_matter(target):
    """Each part changes the logits here (a model without it would fail the parity above): the sinks dropped, the
    clamp off, gate / up read as halves, the router's bias off."""
    model, want = ours(target, torch.float64)
    layers = model.model.layers
    changes = {"sinks": [(layer.self_attn, "sinks", None) for layer in layers],
               "clamp": [(layer.mlp.experts, "limit", None) for layer in layers],
               "halves": [(layer.mlp.experts, "interleaved", False) for layer in layers],
               "up_offset": [(layer.mlp.experts, "up_offset", 0.0) for layer in layers],
               "router_bias": [(layer.mlp.router, "bias", None) for layer in layers]}
    for name, edits in changes.items():
        kept = [(module, attr, getattr(module, attr)) for module, attr, _ in edits]
        for module, attr, value in edits:
            setattr(module, attr, value)
        with torch.no_grad():
            got = model.logits(model(IDS, torch.arange(IDS.shape[1]).expand_as(IDS))[0])
        for module, attr, value in kept:
            setattr(module, attr, value)
        assert (got - want).abs().max() > 1e-3, name


@pytest.mark.parametrize("attention", ["auto", "eager", "flex"])
def test_greedy_speculative_decoding_through_a_gpt_oss_target_equals_target_only(target, tmp_path, attention):
    spec = draftsmith.load_spec("eagle3-llama").with_decoding(attention=attention)
    model = draftsmith.assemble(spec, target=target, dtype="float32",
                                draft=write_eagle3(tmp_path / "d", target, aux_ids=[0, 1, 2]))
    assert model.target.model.layers[0].self_attn.sinks is not None
    decodes_as_target_only(model)


def test_the_mxfp4_layout_is_refused_with_the_fix(target, tmp_path):
    folder = edit_config(target, tmp_path / "mxfp4", quantization_config={"quant_method": "mxfp4"})
    with pytest.raises(UnsupportedTarget, match=r"quant_method='mxfp4'.*_blocks.*Fix: .*bf16.*dequantize=True"):
        plan_target(folder, default_registry(), backends.sdpa)


@pytest.mark.parametrize("key, value", [("num_experts_per_tok", 5), ("num_local_experts", 0), ("swiglu_limit", -1.0),
                                        ("swiglu_alpha", -1.0), ("swiglu_alpha", 0.0)])
def test_expert_settings_not_computed_are_refused_by_name(target, tmp_path, key, value):
    folder = edit_config(target, tmp_path / key, **{key: value})
    with pytest.raises(UnsupportedTarget, match=f"{key}={value} in its mixture-of-experts layers.*allowed"):
        plan_target(folder, default_registry(), backends.sdpa)
