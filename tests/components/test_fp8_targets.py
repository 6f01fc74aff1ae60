"""FP8 targets as the published checkpoints store them: compressed-tensors (llm-compressor's FP8-dynamic and FP8:
float-quantized config groups, ``weight_scale`` per tensor [1] or per channel [out, 1], static ``input_scale`` [1],
scales in the model's dtype) and AutoFP8 (quant_method fp8, activation_scheme static or dynamic, 0-d scales). Each
loads bit for bit, computes the logits an independent reference computes (transformers' Llama on the weights
dequantized in float32, each static linear's input fake-quantized with its input_scale, a dynamic one's per token
with its own max-abs / 448, as compressed-tensors computes on the CPU), and decodes greedily as target-only; a
static target missing an input_scale, or one whose config draftsmith refuses, fails before any tensor is read.
Quant isolation (invariant 26) both ways with a static target and a static draft. The configs' reading and
refusals: test_fp8_target_configs.py; FineGrainedFP8 and FP8_BLOCK targets: test_fp8_block_targets.py."""
import json
import shutil

import pytest
import torch
import yaml
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle1, write_target
from draftsmith.testing.quant import quantize_folder

from fp8_cases import (CASES, LAYERS, MODULES, assemble, bits, ct_args, fake_quant, fp8_modules, reference_logits,
                       write_fp8_target, write_reference)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fp8-targets")
    write_target(root / "float-target", "llama", num_hidden_layers=LAYERS, seed=1)
    write_eagle1(root / "draft", root / "float-target", bias=False)
    for label, case in CASES.items():
        write_reference(write_fp8_target(root / label, case), root / f"{label}-float")
    return root


@pytest.mark.parametrize("label", list(CASES))
def test_an_fp8_target_loads_bit_for_bit_as_its_config_says(root, label):
    """The quantized linears are the file's (targets less ignore), each holding the stored fp8 values and scales
    (a bf16 or 0-d scale as the float32 [1] / [out, 1] of the same values); the others and lm_head stay float."""
    case = CASES[label]
    model = assemble(root / label, root / "draft")
    ckpt = load_file(str(root / label / "model.safetensors"))
    want = {m for m in MODULES if m not in case["plain"]}
    assert fp8_modules(model.target) == want and len(want) == len(MODULES) - len(case["plain"])
    state = model.target.state_dict()
    assert state.keys() == ckpt.keys()
    for k, v in ckpt.items():
        if k.endswith("_scale"):
            held = (1,) if v.dim() == 0 or k.endswith("input_scale") or case["weight"] == "tensor" else (v.shape[0], 1)
            assert state[k].dtype == torch.float32 and state[k].shape == held, k
            assert torch.equal(state[k].reshape(v.shape), v.to(torch.float32)), k
        else:
            assert state[k].dtype == v.dtype and torch.equal(bits(state[k]), bits(v)), k
    assert sum(k.endswith(".input_scale") for k in state) == (len(want) if case["static"] else 0)
    assert model.target.dims.config.quantization_config == case["config"]   # its own, read and kept


@pytest.mark.parametrize("label", list(CASES))
def test_an_fp8_target_computes_the_logits_of_its_reference(root, label):
    """float32 logits to 1e-4 of transformers' on the dequantized weights (static: fake-quantized inputs)."""
    model = assemble(root / label, root / "draft")
    ids = torch.tensor([[5, 17, 3, 88, 41, 9, 60, 2]])
    with torch.no_grad():
        got = model.target.logits(model.target(ids, torch.arange(ids.shape[1])[None])[0])
    torch.testing.assert_close(got, reference_logits(root / label, ids), atol=1e-4, rtol=0)


@pytest.mark.parametrize("label", list(CASES))
def test_speculative_greedy_on_an_fp8_target_equals_its_target_only_greedy(root, label):
    model = assemble(root / label, root / "draft")
    for kw in ({"topk": 2, "steps": 3, "draft_tokens": 6}, {"topk": 1, "steps": 4, "draft_tokens": 5}):
        out = model.generate([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[], **kw)
        base = model.generate_baseline([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[])
        assert [o.token_ids for o in out] == [b.token_ids for b in base]


def test_a_static_target_in_bfloat16_keeps_its_scales_in_float32(root):
    """Scales are never cast to the model dtype: an input_scale stored float32 loads unrounded into a bf16 model."""
    model = draftsmith.assemble("eagle1-llama", target=root / "autofp8-static", draft=root / "draft",
                                dtype="bfloat16")
    ckpt = load_file(str(root / "autofp8-static" / "model.safetensors"))
    state = model.target.state_dict()
    scales = [k for k in ckpt if k.endswith("_scale")]
    assert len(scales) == 2 * (len(MODULES) - 1)
    for k in scales:
        assert state[k].dtype == torch.float32 and torch.equal(state[k].reshape(()), ckpt[k]), k
    assert model.target.model.layers[0].self_attn.q_proj.weight.dtype == torch.bfloat16


def test_static_activations_change_the_logits_the_reference_sees(root):
    """The fake-quant is not a no-op at this scale: without it the reference's logits move well past 1e-4."""
    ids = torch.tensor([[5, 17, 3, 88, 41, 9, 60, 2]])
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(root / "ct-tensor-static-float", dtype=torch.float32)
    with torch.no_grad():
        assert (plain(ids).logits - reference_logits(root / "ct-tensor-static", ids)).abs().max() > 1e-2


@pytest.mark.parametrize("label", ["ct-tensor-static", "autofp8-static"])
def test_a_static_target_missing_an_input_scale_is_refused_before_any_tensor_is_read(root, label, tmp_path,
                                                                                     no_tensor_reads):
    folder = shutil.copytree(root / label, tmp_path / label)
    tensors = load_file(str(folder / "model.safetensors"))
    save_safetensors({k: v for k, v in tensors.items() if not (k.startswith("model.layers.0.")
                                                              and k.endswith(".input_scale"))}, folder)

    no_tensor_reads("the names were checked")
    with pytest.raises(CheckpointMismatch) as err:
        assemble(folder, root / "draft")
    assert any(line.startswith("missing") and "model.layers.0." in line and "input_scale" in line
               for line in err.value.problems), err.value.problems


def test_a_refused_target_fails_before_any_tensor_is_read(root, tmp_path, no_tensor_reads):
    folder = shutil.copytree(root / "ct-channel-dynamic", tmp_path / "t")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["quantization_config"]["kv_cache_scheme"] = ct_args("tensor", False)
    (folder / "config.json").write_text(json.dumps(cfg))

    no_tensor_reads()
    with pytest.raises(UnsupportedTarget, match="kv_cache_scheme="):
        assemble(folder, root / "draft")


def write_static_draft(folder, target):
    """An EAGLE-1 draft whose layer linears are FP8 per tensor with a static input_scale [1] each."""
    write_eagle1(folder, target, bias=False)
    done = quantize_folder(folder, r"^layers\.\d+\.", scheme="tensor")
    tensors = load_file(str(folder / "model.safetensors"))
    g = torch.Generator().manual_seed(3)
    save_safetensors(tensors | {n.removesuffix("weight") + "input_scale": 0.002 + 0.01 * torch.rand(1, generator=g)
                                for n in done}, folder)
    return folder


@pytest.fixture(scope="module")
def static_draft(root):
    spec = yaml.safe_load((BUILTIN_DIR / "eagle1-llama-fp8.yaml").read_text())
    spec["name"] = "fp8-static"
    spec["quant"] |= {"scheme": "tensor", "activation": "static"}
    (root / "fp8-static.yaml").write_text(yaml.safe_dump(spec))
    return write_static_draft(root / "static-draft", root / "float-target"), str(root / "fp8-static.yaml")


def same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(sa[k].dtype == sb[k].dtype and torch.equal(bits(sa[k]), bits(sb[k]))
                                          for k in sa)


def test_a_static_draft_holds_its_input_scales_and_quantizes_its_inputs_with_them(root, static_draft):
    draft, spec = static_draft
    model = assemble(root / "float-target", draft, spec)
    ckpt = load_file(str(draft / "model.safetensors"))
    q = model.draft.layers[0].self_attn.q_proj
    assert q.input_scale.dtype == torch.float32 and torch.equal(q.input_scale, ckpt["layers.0.self_attn.q_proj."
                                                                                   "input_scale"])
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(0)) * 3
    w = ckpt["layers.0.self_attn.q_proj.weight"].to(torch.float32) * ckpt["layers.0.self_attn.q_proj.weight_scale"]
    with torch.no_grad():
        torch.testing.assert_close(q(x), torch.nn.functional.linear(fake_quant(x, q.input_scale), w),
                                   atol=1e-6, rtol=0)
    out = model.generate([[1, 2, 3]], max_new_tokens=10, stop=[], topk=2, steps=3, draft_tokens=6)[0]
    assert out.token_ids == model.generate_baseline([[1, 2, 3]], max_new_tokens=10, stop=[])[0].token_ids


def test_a_static_target_never_quantizes_a_float_draft(root):
    """Invariant 26: a compressed-tensors static target beside an unquantized draft; the draft is the one it is
    beside a float target, bit for bit, and the target's quantization is its config's alone."""
    fp8_target = assemble(root / "ct-tensor-static", root / "draft")
    float_target = assemble(root / "float-target", root / "draft")
    assert not fp8_modules(fp8_target.draft) and same_state(fp8_target.draft, float_target.draft)
    assert "quantization_config" not in (root / "draft" / "config.json").read_text()
    assert len(fp8_modules(fp8_target.target)) == len(MODULES) - 4


def test_a_static_draft_never_quantizes_a_float_target(root, static_draft):
    """Invariant 26 the other way: the draft's static quant comes from its spec; the float target is the one an
    unquantized draft sees, bit for bit, with no quantization_config."""
    draft, spec = static_draft
    quantized, plain = assemble(root / "float-target", draft, spec), assemble(root / "float-target", root / "draft")
    assert len(fp8_modules(quantized.draft)) == 7 and not fp8_modules(quantized.target)
    assert same_state(quantized.target, plain.target)
    assert quantized.target.dims.config.to_dict() == plain.target.dims.config.to_dict()
    assert "quantization_config" not in quantized.target.dims.config.to_dict()


@pytest.mark.gpu
@pytest.mark.parametrize("scheme", ["tensor", "channel"])
def test_native_static_scaled_mm_on_cuda_is_close_to_the_fake_quantized_matmul(scheme):
    """Untested without a GPU: torch._scaled_mm with the static input scale vs the CPU path's maths."""
    from draftsmith.components.quant import FP8Params, fp8_linear, quantize

    lin = torch.nn.Linear(256, 128, bias=True, device="cuda", dtype=torch.bfloat16)
    w = lin.weight.detach().float()
    fp8_linear(lin, FP8Params(scheme=scheme, activation="static"), torch.bfloat16)
    q, s = quantize(w, scheme)
    lin._parameters["weight"].data = q.cuda()
    lin.weight_scale = s.cuda()
    lin.input_scale = torch.tensor([0.01], device="cuda")
    x = torch.randn(4, 16, 256, device="cuda", dtype=torch.bfloat16) * 2
    want = torch.nn.functional.linear(fake_quant(x, lin.input_scale), lin.weight, lin.bias)
    got = lin(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), atol=0.1, rtol=0.05)
