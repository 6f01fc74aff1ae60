"""FP8 targets as the published checkpoints store them: compressed-tensors (llm-compressor's FP8-dynamic and FP8:
float-quantized config groups, ``weight_scale`` per tensor [1] or per channel [out, 1], static ``input_scale`` [1],
scales in the model's dtype) and AutoFP8 (quant_method fp8, activation_scheme static, 0-d scales). Each loads bit
for bit, computes the logits an independent reference computes (transformers' Llama on the weights dequantized in
float32, each static linear's input fake-quantized with its input_scale, a dynamic one's per token with its own
max-abs / 448, as compressed-tensors computes on the CPU), and decodes greedily as target-only; what
draftsmith cannot compute is refused by name before the model is built. FineGrainedFP8 (Qwen3-*-FP8, DeepSeek-V3:
128 x 128 weight_scale_inv, dynamic inputs) likewise, against a reference quantizing inputs per token and group of
128 channels, and llm-compressor's FP8_BLOCK (the same blocks stored as weight_scale). Quant isolation (invariant
26) both ways with a static target and a static draft."""
import json
import re
import shutil

import pytest
import torch
import yaml
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components import quant
from draftsmith.components.quant import FP8Weight, dequantize, quantize
from draftsmith.components.quant_models import matching_linears, target_params
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import edit_config, write_eagle1, write_target
from draftsmith.testing.quant import dequantized_copy, group_fake_quant, quantize_folder

FP8 = torch.float8_e4m3fn
LAYERS = 4
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")
MODULES = [f"model.layers.{i}.{lin}" for i in range(LAYERS) for lin in LINEARS]


def ct_args(strategy, dynamic, **extra):
    """Quantization args as compressed-tensors 0.20 dumps them into config.json."""
    return {"dynamic": dynamic, "group_size": None, "num_bits": 8, "strategy": strategy, "symmetric": True,
            "type": "float", **extra}


def ct_config(weights, inputs, *, targets=("Linear",), ignore=("lm_head",), **top):
    """A quantization_config as llm-compressor writes it (ModelCompressor.update_config, compressed-tensors 0.20)."""
    group = {"format": "float-quantized", "input_activations": inputs, "output_activations": None,
             "targets": list(targets), "weights": weights}
    return {"config_groups": {"group_0": group}, "format": "float-quantized", "global_compression_ratio": None,
            "ignore": list(ignore), "kv_cache_scheme": None, "moe_sparsity_config": None,
            "quant_method": "compressed-tensors", "quantization_status": "compressed", "sparsity_config": {},
            "transform_config": {}, "version": "0.20.1", **top}


TOKEN = ct_args("token", True)                                    # FP8-dynamic's inputs
BLOCK_WEIGHTS = ct_args("block", False, block_structure=[128, 128])   # FP8_BLOCK's weights: weight_scale per block
BLOCK_INPUTS = ct_args("group", True, group_size=128)                # and its inputs: per token and 128 channels
STATIC = ct_args("tensor", False, observer="static_minmax")      # FP8's inputs: input_scale [1]
# weight: strategy; static: input_scale tensors; shape: a per-tensor scale's stored shape; dtype: the scales';
# plain: the linears the config leaves unquantized (the writer reads this, not the config)
CASES = {
    "ct-tensor-dynamic": dict(config=ct_config(ct_args("tensor", False), TOKEN), weight="tensor", static=False,
                              shape=(1,), dtype=torch.float32, plain=()),
    "ct-channel-dynamic": dict(config=ct_config(ct_args("channel", False), TOKEN), weight="channel", static=False,
                               shape=None, dtype=torch.bfloat16, plain=()),
    "ct-tensor-static": dict(
        config=ct_config(ct_args("tensor", False), STATIC,
                         targets=[r"re:.*self_attn\.[qkvo]_proj$", r"re:.*mlp\.(gate|up|down)_proj$"],
                         ignore=["lm_head", r"re:model\.layers\.1\.mlp\.", "model.layers.2.self_attn.o_proj"]),
        weight="tensor", static=True, shape=(1,), dtype=torch.bfloat16,
        plain=("model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj", "model.layers.1.mlp.down_proj",
               "model.layers.2.self_attn.o_proj")),
    # the minimal config transformers' compressed-tensors docs show for nm-testing/Meta-Llama-3.1-8B-Instruct-FP8-hf
    # (an older llm-compressor: naive-quantized, frozen, defaults left out), its scales [1] BF16
    "ct-naive-static": dict(config={"config_groups": {"group_0": {
        "input_activations": {"num_bits": 8, "strategy": "tensor", "type": "float"}, "targets": ["Linear"],
        "weights": {"num_bits": 8, "strategy": "tensor", "type": "float"}}}, "format": "naive-quantized",
        "ignore": ["lm_head"], "quant_method": "compressed-tensors", "quantization_status": "frozen"},
        weight="tensor", static=True, shape=(1,), dtype=torch.bfloat16, plain=()),
    "autofp8-static": dict(config={"quant_method": "fp8", "activation_scheme": "static",
                                   "ignored_layers": ["lm_head", "model.layers.3.mlp.gate_proj"]},
                           weight="tensor", static=True, shape=(), dtype=torch.float32,
                           plain=("model.layers.3.mlp.gate_proj",)),
    # AutoFP8's FP8-dynamic as its README shows it: per-tensor weight_scale, no input_scale; inputs per token (vLLM)
    "autofp8-dynamic": dict(config={"quant_method": "fp8", "activation_scheme": "dynamic",
                                    "ignored_layers": ["lm_head"]},
                            weight="tensor", static=False, shape=(), dtype=torch.float32, plain=()),
}


def write_fp8_target(folder, case):
    """A tiny Llama stored as ``case`` says: e4m3 weights (max-abs scaled), their scales, static input scales."""
    write_target(folder, "llama", num_hidden_layers=LAYERS, seed=1)
    tensors = load_file(str(folder / "model.safetensors"))
    g = torch.Generator().manual_seed(7)
    for name in MODULES:
        if name in case["plain"]:
            continue
        w = tensors[f"{name}.weight"].to(torch.float32)
        amax = w.abs().amax(1, keepdim=True) if case["weight"] == "channel" else w.abs().amax().reshape(1)
        scale = (amax / 448).to(case["dtype"])
        tensors[f"{name}.weight"] = (w / scale.to(torch.float32)).clamp(-448, 448).to(FP8)
        tensors[f"{name}.weight_scale"] = scale if case["shape"] is None else scale.reshape(case["shape"])
        if case["static"]:   # small enough that the largest inputs clamp at 448
            s = 0.002 + 0.01 * torch.rand(1, generator=g)
            tensors[f"{name}.input_scale"] = s.to(case["dtype"]).reshape(case["shape"])
    save_safetensors(tensors, folder)
    edit_config(folder, quantization_config=case["config"])
    return folder


def write_reference(src, dst):
    """transformers' float folder: each fp8 weight times its scale in float32; scales and the config's
    quantization_config dropped."""
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    t = load_file(str(src / "model.safetensors"))
    out = {k: v for k, v in t.items() if not k.endswith(("_scale",))}
    for k, v in t.items():
        if v.dtype == FP8:
            out[k] = v.to(torch.float32) * t[k.removesuffix("weight") + "weight_scale"].to(torch.float32)
    save_safetensors(out, dst)
    edit_config(dst, drop=["quantization_config"])
    return dst


def fake_quant(x, s):
    s = s.to(torch.float32).reshape(())
    return ((x.to(torch.float32) / s).clamp(-448, 448).to(FP8).to(torch.float32) * s).to(x.dtype)


def per_token_fake_quant(x):
    """compressed-tensors' dynamic per-token fp8 inputs: each token scaled by its own max-abs / 448."""
    s = (x.abs().amax(-1, keepdim=True).to(torch.float32) / 448).clamp(min=1e-12)
    return ((x.to(torch.float32) / s).clamp(-448, 448).to(FP8).to(torch.float32) * s).to(x.dtype)


def dynamic_inputs(folder) -> bool:
    qc = json.loads((folder / "config.json").read_text())["quantization_config"]
    groups = qc.get("config_groups") or {}
    return any((g.get("input_activations") or {}).get("dynamic") is True for g in groups.values()) or \
        qc.get("activation_scheme") == "dynamic"


def reference_logits(folder, ids):
    """transformers' LlamaForCausalLM on the dequantized weights; a static linear's input fake-quantized first, a
    dynamic one's per token."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder.parent / f"{folder.name}-float", dtype=torch.float32)
    dynamic = dynamic_inputs(folder)
    for k, s in load_file(str(folder / "model.safetensors")).items():
        if k.endswith(".input_scale"):
            model.get_submodule(k.removesuffix(".input_scale")).register_forward_pre_hook(
                lambda _, args, s=s: (fake_quant(args[0], s),))
        elif k.endswith(".weight_scale") and dynamic:
            model.get_submodule(k.removesuffix(".weight_scale")).register_forward_pre_hook(
                lambda _, args: (per_token_fake_quant(args[0]),))
    with torch.no_grad():
        return model(ids).logits


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fp8-targets")
    write_target(root / "float-target", "llama", num_hidden_layers=LAYERS, seed=1)
    write_eagle1(root / "draft", root / "float-target", bias=False)
    for label, case in CASES.items():
        write_reference(write_fp8_target(root / label, case), root / f"{label}-float")
    return root


def assemble(target, draft, spec="eagle1-llama"):
    return draftsmith.assemble(spec, target=target, draft=draft, dtype="float32")


def fp8_modules(module):
    return {n for n, m in module.named_modules() if isinstance(m, FP8Weight)}


def bits(t):
    return t.view(torch.uint8) if t.dtype == FP8 else t


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


REFUSED = {
    "int8 W8A8 (int-quantized)": (
        ct_config(ct_args("channel", False) | {"type": "int"}, ct_args("token", True) | {"type": "int"},
                  format="int-quantized") | {"config_groups": {"group_0": {
                      "format": "int-quantized", "targets": ["Linear"], "output_activations": None,
                      "weights": ct_args("channel", False) | {"type": "int"},
                      "input_activations": ct_args("token", True) | {"type": "int"}}}},
        "config_groups.group_0.format='int-quantized' is not supported"),
    "int4 W4A16 (pack-quantized)": (
        ct_config(ct_args("group", False) | {"type": "int", "num_bits": 4, "group_size": 128}, None,
                  format="pack-quantized") | {"config_groups": {"group_0": {
                      "targets": ["Linear"], "weights": ct_args("group", False) | {"type": "int", "num_bits": 4},
                      "input_activations": None}}},
        ("format='pack-quantized' is not supported", "allowed: float-quantized or naive-quantized")),
    "naive-quantized int": (
        {"quant_method": "compressed-tensors", "format": "naive-quantized", "config_groups": {"group_0": {
            "targets": ["Linear"], "weights": ct_args("tensor", False) | {"type": "int"}}}},
        ("config_groups.group_0.weights.type='int' is not supported", "allowed: 'float'")),
    "block inputs grouped otherwise": (
        ct_config(BLOCK_WEIGHTS, ct_args("group", True, group_size=64)),
        ("config_groups.group_0.input_activations.group_size=64 is not supported with block weights",
         "allowed: 128 (block_structure[1])")),
    "static inputs with block weights": (
        ct_config(BLOCK_WEIGHTS, STATIC),
        ("config_groups.group_0.input_activations={'dynamic': False, 'group_size': None, 'strategy': 'tensor'} is "
         "not supported", "allowed: null or {strategy: group, group_size: 128, dynamic: true} with block weights")),
    "per-token inputs with block weights": (
        ct_config(BLOCK_WEIGHTS, TOKEN),
        "config_groups.group_0.input_activations={'dynamic': True, 'group_size': None, 'strategy': 'token'} is not"),
    "block weights without block_structure": (
        ct_config(ct_args("block", False), BLOCK_INPUTS),
        ("config_groups.group_0.weights.block_structure=None is not supported", "allowed: [rows, columns]")),
    "group weights": (ct_config(ct_args("group", False) | {"group_size": 128}, TOKEN),
                      "config_groups.group_0.weights.strategy='group' is not supported"),
    "asymmetric": (ct_config(ct_args("tensor", False) | {"symmetric": False}, TOKEN),
                   "config_groups.group_0.weights.symmetric=False is not supported"),
    "asymmetric inputs": (ct_config(ct_args("tensor", False), STATIC | {"symmetric": False}),
                          "config_groups.group_0.input_activations.symmetric=False is not supported"),
    "4-bit float": (ct_config(ct_args("tensor", False) | {"num_bits": 4}, None),
                    ("config_groups.group_0.weights.num_bits=4 is not supported", "allowed: 8")),
    "per-tensor dynamic inputs": (
        ct_config(ct_args("tensor", False), ct_args("tensor", True)),
        ("config_groups.group_0.input_activations={'dynamic': True, 'strategy': 'tensor'} is not supported",
         "not lossless")),
    "output activations": (ct_config(ct_args("tensor", False), TOKEN) | {"config_groups": {"group_0": {
        "targets": ["Linear"], "weights": ct_args("tensor", False), "output_activations": STATIC}}},
        "config_groups.group_0.output_activations="),
    "groups that differ": (
        ct_config(ct_args("tensor", False), TOKEN) | {"config_groups": {
            "group_0": {"targets": [r"re:.*self_attn\..*"], "weights": ct_args("tensor", False),
                        "input_activations": TOKEN},
            "group_1": {"targets": [r"re:.*mlp\..*"], "weights": ct_args("channel", False),
                        "input_activations": TOKEN}}},
        "config_groups={'group_0': 'tensor/dynamic', 'group_1': 'channel/dynamic'} is not supported"),
    "KV-cache scheme": (ct_config(ct_args("tensor", False), STATIC, kv_cache_scheme=ct_args("tensor", False)),
                        "kv_cache_scheme={"),
    "sparse 2:4": (ct_config(ct_args("tensor", False), TOKEN, sparsity_config={"format": "sparse-24-bitmask"}),
                   "sparsity_config={'format': 'sparse-24-bitmask'} is not supported"),
    "a regex draftsmith refuses": (ct_config(ct_args("tensor", False), TOKEN, ignore=["lm_head", "re:(a+)+"]),
                                   "ignore.1='re:(a+)+' is not supported"),
    "AutoFP8 KV-cache scales": ({"quant_method": "fp8", "activation_scheme": "static", "kv_cache_scheme": "static"},
                                "kv_cache_scheme='static' is not supported"),
    "static with block scales": ({"quant_method": "fp8", "activation_scheme": "static",
                                  "weight_block_size": [128, 128]}, "activation_scheme='static' is not supported"),
    "another method": ({"quant_method": "awq", "bits": 4}, "quant_method='awq' is not supported; allowed: fp8"),
    "power-of-two input scales": ({"quant_method": "fp8", "weight_block_size": [128, 128], "scale_fmt": "ue8m0"},
                                  "scale_fmt='ue8m0' is not supported"),
    "FP8 embedding tables": ({"quant_method": "fp8", "weight_block_size": [128, 128],
                              "modules_to_convert": ["embed_tokens"]},
                             ("modules_to_convert=['embed_tokens'] is not supported", "no FP8 embeddings",
                              "allowed: null or empty (every Linear is converted regardless)")),
    "a class-name target": (ct_config(ct_args("channel", False), TOKEN, targets=["Linear", "Embedding"]),
                            ("config_groups.group_0.targets.1='Embedding' is not supported", "Linear layers only")),
    "a skip regex draftsmith refuses": ({"quant_method": "fp8", "weight_block_size": [128, 128],
                                         "ignored_layers": ["lm_head", "(a+)+"]},
                                        "ignored_layers.1='(a+)+' is not supported"),
    "a skip list that is no list": ({"quant_method": "fp8", "weight_block_size": [128, 128],
                                     "modules_to_not_convert": "lm_head"},
                                    "modules_to_not_convert='lm_head' is not supported"),
}


@pytest.mark.parametrize("label", list(REFUSED))
def test_what_draftsmith_cannot_compute_is_refused_by_key_found_and_allowed(label):
    config, said = REFUSED[label]
    with pytest.raises(UnsupportedTarget) as err:
        target_params(config)
    assert all(s in str(err.value) for s in (said if isinstance(said, tuple) else (said,)))
    assert "allowed: " in str(err.value), str(err.value)


def test_a_refused_target_fails_before_any_tensor_is_read(root, tmp_path, no_tensor_reads):
    folder = shutil.copytree(root / "ct-channel-dynamic", tmp_path / "t")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["quantization_config"]["kv_cache_scheme"] = ct_args("tensor", False)
    (folder / "config.json").write_text(json.dumps(cfg))

    no_tensor_reads()
    with pytest.raises(UnsupportedTarget, match="kv_cache_scheme="):
        assemble(folder, root / "draft")


def test_the_configs_as_published_map_onto_fp8_params():
    """FP8-dynamic: channel + dynamic on every Linear but lm_head; FP8: tensor + static; naive-quantized float
    (older llm-compressor) reads as float-quantized; groups of one setting join their targets; FineGrainedFP8
    quantizes every decoder layer's linear (an empty modules_to_convert names no embedding table to add)."""
    p = target_params(ct_config(ct_args("channel", False), TOKEN))
    assert (p.scheme, p.activation, p.modules, p.exclude) == ("channel", "dynamic", ("^",), (r"^lm_head$",))
    p = target_params(ct_config(ct_args("tensor", False), STATIC, format="naive-quantized") | {"config_groups": {
        "group_0": {"targets": [r"re:.*self_attn\..*"], "weights": ct_args("tensor", False), "input_activations":
                    STATIC},
        "group_1": {"targets": ["model.layers.0.mlp.down_proj"], "weights": ct_args("tensor", False),
                    "input_activations": STATIC}}})
    assert (p.scheme, p.activation) == ("tensor", "static")
    assert p.modules == (r"^(?:.*self_attn\..*)", r"^model\.layers\.0\.mlp\.down_proj$")
    p = target_params(ct_config(ct_args("tensor", False), None))
    assert p.activation == "none"   # weight-only FP8 (W8A16)
    p = target_params({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})
    assert (p.scheme, p.block, p.activation) == ("block", (128, 128), "dynamic")   # per token and group of 128
    for config in ({"quant_method": "fp8", "activation_scheme": "dynamic"}, {"quant_method": "fp8"}):   # AutoFP8
        p = target_params(config)
        assert (p.scheme, p.activation) == ("tensor", "dynamic")   # per token, as vLLM runs it on FP8 GPUs
    p = target_params({"quant_method": "fp8", "weight_block_size": [64, 128]})   # FineGrainedFP8Config's default
    assert (p.scheme, p.block, p.activation) == ("block", (64, 128), "dynamic")
    p = target_params({"quant_method": "fp8", "weight_block_size": [128, 128], "scale_fmt": "float",
                       "modules_to_convert": []})
    assert p.modules == (r"^model\.layers\.\d+\.",)


# a Llama-like module tree 12 layers deep, with an MoE router (mlp.gate) beside gate_proj: the names the skip lists
# below are matched in
NAMED = ["lm_head", *(f"model.layers.{i}.{lin}" for i in (0, 1, 11)
                      for lin in ("self_attn.q_proj", "mlp.gate", "mlp.gate_proj", "mlp.down_proj"))]
LAYER = {i: [n for n in NAMED if n.startswith(f"model.layers.{i}.")] for i in (0, 1, 11)}
DOWN = [n for n in NAMED if n.endswith("down_proj")]
FINE = {"quant_method": "fp8", "weight_block_size": [128, 128]}
# config -> the names it leaves unquantized, as compressed-tensors 0.20's is_match and transformers 5.24's
# should_convert_module (FineGrainedFP8's modules_to_not_convert, ignored_layers its alias) say
SKIPPED = {
    "ct: a plain ignore entry is an exact name": (ct_config(ct_args("channel", False), TOKEN,
                                                            ignore=["lm_head", "mlp.down_proj"]), ["lm_head"]),
    "ct: lm_head quantized when not ignored": (ct_config(ct_args("channel", False), TOKEN, ignore=[]), []),
    "ct: an ignore regex matched at the start": (ct_config(ct_args("channel", False), TOKEN,
                                                           ignore=["lm_head", r"re:.*down_proj$"]), ["lm_head", *DOWN]),
    "ct: layer 1's mlp, not layer 11's": (ct_config(ct_args("channel", False), TOKEN,
                                                    ignore=["lm_head", r"re:model\.layers\.1\.mlp"]),
                                          ["lm_head", *LAYER[1][1:]]),
    "ct: an ignored class name excludes no Linear": (ct_config(ct_args("channel", False), TOKEN,
                                                               ignore=["Embedding", "lm_head"]), ["lm_head"]),
    "ct: exact targets": (ct_config(ct_args("channel", False), TOKEN, targets=["model.layers.0.mlp.gate", "lm_head"],
                                    ignore=[]), [n for n in NAMED if n not in ("lm_head", "model.layers.0.mlp.gate")]),
    "fp8: a layer prefix": (FINE | {"modules_to_not_convert": ["lm_head", "model.layers.0"]}, ["lm_head", *LAYER[0]]),
    "fp8: a prefix ends at a module boundary": (FINE | {"modules_to_not_convert": ["model.layers.1"]},
                                                ["lm_head", *LAYER[1]]),
    "fp8: a regex": (FINE | {"modules_to_not_convert": [r"model.layers.*.mlp.down_proj"]}, ["lm_head", *DOWN]),
    "fp8: a suffix": (FINE | {"ignored_layers": ["down_proj"]}, ["lm_head", *DOWN]),
    "fp8: a router, not gate_proj": (FINE | {"modules_to_not_convert": ["mlp.gate"]},
                                     ["lm_head", *(f"model.layers.{i}.mlp.gate" for i in (0, 1, 11))]),
    "fp8: no prefix but at the start": (FINE | {"modules_to_not_convert": ["layers.1"]}, ["lm_head"]),
}


def linear_tree(names):
    root = torch.nn.Module()
    for name in names:
        *path, leaf = name.split(".")
        node = root
        for part in path:
            if not hasattr(node, part):
                node.add_module(part, torch.nn.Module())
            node = getattr(node, part)
        node.add_module(leaf, torch.nn.Linear(1, 1, device="meta"))
    return root


@pytest.mark.parametrize("label", list(SKIPPED))
def test_targets_and_skip_lists_match_module_names_as_their_own_loaders_do(label):
    config, skipped = SKIPPED[label]
    quantized = matching_linears(linear_tree(NAMED), target_params(config))
    assert sorted(n for n in NAMED if n not in quantized) == sorted(skipped)


def write_quantized_head(folder, *, tie, head=True):
    """A Llama whose decoder linears are FP8 per channel with per-token inputs (compressed-tensors FP8-dynamic) and,
    with ``head``, its lm_head too (targets Linear, nothing ignored; a tied one's files then hold the quantized copy
    of the embedding as lm_head); without, lm_head ignored."""
    write_target(folder, "llama", num_hidden_layers=2, seed=1, tie_word_embeddings=tie)
    t = load_file(str(folder / "model.safetensors"))
    if head and "lm_head.weight" not in t:
        t["lm_head.weight"] = t["model.embed_tokens.weight"].clone()
    for name in [k for k, v in t.items() if k.endswith(".weight") and v.dim() == 2 and "embed" not in k]:
        t[name], t[name.removesuffix("weight") + "weight_scale"] = quantize(t[name], "channel")
    save_safetensors(t, folder)
    qc = ct_config(ct_args("channel", False), TOKEN, ignore=[] if head else ["lm_head"])
    edit_config(folder, quantization_config=qc)
    return folder


def test_a_quantized_shared_head_is_dequantized_only_by_its_own_matmul(tmp_path, monkeypatch):
    """An untied FP8 lm_head (ignore: []) loads and computes on per-token inputs; the draft reading it as the shared
    head takes its compute dtype, not its weight: one call dequantizes it once, in its own forward (was twice)."""
    folder = write_quantized_head(tmp_path / "t", tie=False)
    model = assemble(folder, write_eagle1(tmp_path / "d", folder, bias=False))
    head, ckpt = model.target.lm_head, load_file(str(folder / "model.safetensors"))
    assert isinstance(head, FP8Weight) and head._parameters["weight"] is not model.target.model.embed_tokens.weight
    h = torch.randn(1, 3, model.target.dims.hidden, generator=torch.Generator().manual_seed(0))
    w = ckpt["lm_head.weight"].to(torch.float32) * ckpt["lm_head.weight_scale"]
    with torch.no_grad():
        torch.testing.assert_close(model.target.logits(h), per_token_fake_quant(h) @ w.T, atol=1e-5, rtol=0)
        seen = []
        monkeypatch.setattr(quant, "dequantize", lambda v, *a: seen.append(tuple(v.shape)) or dequantize(v, *a))
        model.draft.head_of(h, head)
    assert seen == [tuple(w.shape)]


def test_a_tied_target_whose_config_quantizes_lm_head_is_refused_by_key_before_any_tensor_is_read(tmp_path,
                                                                                                 no_tensor_reads):
    """tie_word_embeddings with targets Linear and nothing ignored: lm_head would be FP8 and the embedding float,
    one tensor (and the tied-head ignore rule hid the file's lm_head: a misleading 'missing lm_head.weight'); a
    tied target whose ignore names lm_head loads, its head the embedding."""
    plain = write_quantized_head(tmp_path / "plain", tie=True, head=False)
    model = assemble(plain, write_eagle1(tmp_path / "d", plain, bias=False))
    assert model.target.lm_head.weight is model.target.model.embed_tokens.weight
    folder = write_quantized_head(tmp_path / "t", tie=True)

    no_tensor_reads()
    with pytest.raises(UnsupportedTarget) as err:
        assemble(folder, tmp_path / "d")
    text = str(err.value)
    assert "quantization_config ignore=[] is not supported with tie_word_embeddings true: lm_head is quantized" \
        in text and "allowed: tie_word_embeddings false in config.json where the files hold a quantized lm_head" \
        in text, text


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


# FineGrainedFP8 (Qwen3-*-FP8, DeepSeek-V3): 128 x 128 block scales weight_scale_inv, dynamic inputs quantized per
# token and group of 128 channels; every quantized input is 128 or 256 wide, as the engines require
FINEGRAINED = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128], "fmt": "e4m3"}


@pytest.fixture(scope="module")
def finegrained(root):
    """A Llama 128 wide (MLP 256) stored as transformers' FineGrainedFP8 and Qwen3-FP8 store theirs, its float copy
    (each weight times its block's scale) and an EAGLE-1 draft for it."""
    folder = write_target(root / "finegrained", "llama", num_hidden_layers=LAYERS, seed=1, hidden_size=128,
                          intermediate_size=256)
    draft = write_eagle1(root / "finegrained-draft", folder, bias=False)
    assert len(quantize_folder(folder, r"^model\.layers\.\d+\.", scheme="block", quantization_config=True)) == 28
    dequantized_copy(folder, root / "finegrained-float", scheme="block")
    assert json.loads((folder / "config.json").read_text())["quantization_config"] == FINEGRAINED
    return folder, draft


def grouped_reference_logits(folder, ids, quantize_inputs=True, group=128):
    """transformers' Llama on the dequantized weights, each quantized linear's input fake-quantized per group."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder.parent / f"{folder.name}-float", dtype=torch.float32)
    for name in MODULES if quantize_inputs else ():
        model.get_submodule(name).register_forward_pre_hook(lambda _, args: (group_fake_quant(args[0], group),))
    with torch.no_grad():
        return model(ids).logits


def test_a_finegrained_fp8_target_loads_bit_for_bit_with_dynamic_block_inputs(finegrained):
    """Every layer linear holds the stored e4m3 values and the [ceil(out/128), ceil(in/128)] float32
    weight_scale_inv; each quantizes its inputs per group of 128 channels (no native block product: cuBLAS's needs
    input widths of whole 512 columns, tests/components/test_fp8_kernels.py)."""
    folder, draft = finegrained
    model = assemble(folder, draft)
    ckpt = load_file(str(folder / "model.safetensors"))
    assert fp8_modules(model.target) == set(MODULES)
    state = model.target.state_dict()
    assert state.keys() == ckpt.keys()
    for k, v in ckpt.items():
        assert state[k].dtype == v.dtype and torch.equal(bits(state[k]), bits(v)), k
    assert state["model.layers.0.mlp.down_proj.weight_scale_inv"].shape == (1, 2)
    assert state["model.layers.0.mlp.up_proj.weight_scale_inv"].shape == (2, 1)
    for name in MODULES:
        lin = model.target.get_submodule(name)
        assert (lin.scheme, lin.block, lin.activation, lin.native) == ("block", (128, 128), "dynamic", False)
    assert model.target.dims.config.quantization_config == FINEGRAINED


def test_a_finegrained_fp8_target_computes_the_logits_of_a_reference_quantizing_inputs_per_group(finegrained):
    """float32 logits to 1e-4 of transformers' on the dequantized weights with every quantized linear's input
    fake-quantized per token and group of 128 (what DeepSeek-V3's fp8 gemm, vLLM, SGLang and transformers' kernel
    take); the group quantization moves them well past that (it is not a no-op)."""
    folder, draft = finegrained
    model = assemble(folder, draft)
    ids = torch.tensor([[5, 17, 3, 88, 41, 9, 60, 2]])
    with torch.no_grad():
        got = model.target.logits(model.target(ids, torch.arange(ids.shape[1])[None])[0])
    want = grouped_reference_logits(folder, ids)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    assert (grouped_reference_logits(folder, ids, quantize_inputs=False) - want).abs().max() > 1e-3


def test_speculative_greedy_on_a_finegrained_fp8_target_equals_its_target_only_greedy(finegrained):
    model = assemble(*finegrained)
    for kw in ({"topk": 2, "steps": 3, "draft_tokens": 6}, {"topk": 1, "steps": 4, "draft_tokens": 5}):
        out = model.generate([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[], **kw)
        base = model.generate_baseline([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[])
        assert [o.token_ids for o in out] == [b.token_ids for b in base]


def test_a_finegrained_target_with_partial_input_groups_is_refused_before_any_tensor_is_read(root, tmp_path,
                                                                                             no_tensor_reads):
    """128-column blocks on a Llama 64 wide: its inputs would end in a partial group, which DeepSeek-V3's act_quant
    and vLLM's and SGLang's per_token_group_quant_fp8 assert against; refused by key, naming the linears."""
    folder = write_target(tmp_path / "narrow", "llama", num_hidden_layers=2, seed=1)
    quantize_folder(folder, r"^model\.layers\.\d+\.", scheme="block", quantization_config=True)

    no_tensor_reads()
    with pytest.raises(UnsupportedTarget) as err:
        assemble(folder, root / "draft")
    text = str(err.value)
    assert "weight_block_size=[128, 128] is not supported with activation_scheme dynamic" in text, text
    assert "in groups of 128 channels, a partial group in 12 linear(s): model.layers.0.self_attn.q_proj (64 wide)" \
        in text and "allowed: " in text, text



def test_a_skip_list_regex_that_backtracks_is_refused_by_the_time_bound():
    """modules_to_not_convert entries are regexes (transformers' reading): one that backtracks on every module name
    ('(.|.)*z': 2^31 paths on model.layers.0.self_attn.q_proj) is refused within the weight rules' time bound,
    naming it, instead of hanging assemble."""
    import signal
    from types import SimpleNamespace

    from draftsmith.components.quant_models import quantize_target

    attn = torch.nn.ModuleDict({"q_proj": torch.nn.Linear(128, 128, device="meta")})
    model = torch.nn.ModuleDict({"model": torch.nn.ModuleDict({"layers": torch.nn.ModuleList(
        [torch.nn.ModuleDict({"self_attn": attn})])})})
    cfg = SimpleNamespace(quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128],
                                               "modules_to_not_convert": ["(.|.)*z"]})
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("still matching after 10 s"))
    signal.alarm(10)
    try:
        with pytest.raises(UnsupportedTarget, match=r"the module pattern .+ took more than 0.1 s on "
                                                    r"'model\.layers\.0\.self_attn\.q_proj'"):
            quantize_target(model, cfg)
    finally:
        signal.alarm(0)


def test_modules_to_not_convert_wins_over_ignored_layers_as_transformers_reads_them():
    """transformers reads ignored_layers only where modules_to_not_convert is null: given both, layer 0 is
    converted."""
    p = target_params({"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"],
                       "ignored_layers": ["model.layers.0"]})
    assert not any(re.search(x, "model.layers.0.mlp.down_proj") for x in p.exclude)
    p = target_params({"quant_method": "fp8", "weight_block_size": [128, 128], "ignored_layers": ["model.layers.0"]})
    assert any(re.search(x, "model.layers.0.mlp.down_proj") for x in p.exclude)


# llm-compressor's FP8_BLOCK (compressed-tensors 0.20: QuantizationStrategy.BLOCK, block_structure [128, 128]):
# weight_scale [ceil(out/128), ceil(in/128)] in the model's dtype, inputs dynamic in groups of 128 channels; and
# 128 x 64 blocks (inputs in groups of 64: block_structure[1], not [0])
FP8_BLOCK = ct_config(BLOCK_WEIGHTS, BLOCK_INPUTS)
FP8_BLOCKS = {(128, 128): FP8_BLOCK, (128, 64): ct_config(ct_args("block", False, block_structure=[128, 64]),
                                                          ct_args("group", True, group_size=64))}


@pytest.fixture(scope="module", params=list(FP8_BLOCKS), ids=lambda b: f"{b[0]}x{b[1]}")
def fp8_block(root, request):
    """The finegrained Llama stored as llm-compressor's FP8_BLOCK stores it (bf16 block weight_scale), its float
    copy and an EAGLE-1 draft for it; its block."""
    block = request.param
    folder = write_target(root / f"fp8-block-{block[1]}", "llama", num_hidden_layers=LAYERS, seed=1,
                          hidden_size=128, intermediate_size=256)
    draft = write_eagle1(root / f"fp8-block-{block[1]}-draft", folder, bias=False)
    assert len(quantize_folder(folder, r"^model\.layers\.\d+\.", block=block, block_scale="weight_scale")) == 28
    tensors = load_file(str(folder / "model.safetensors"))
    save_safetensors({k: v.to(torch.bfloat16) if k.endswith("_scale") else v for k, v in tensors.items()}, folder)
    edit_config(folder, quantization_config=FP8_BLOCKS[block])
    dequantized_copy(folder, folder.parent / f"{folder.name}-float", block=block, block_scale="weight_scale")
    return folder, draft, block


def test_fp8_block_maps_onto_the_block_scheme_under_compressed_tensors_scale_name():
    p = target_params(FP8_BLOCK)
    assert (p.scheme, p.block, p.block_scale, p.activation, p.modules, p.exclude) == \
        ("block", (128, 128), "weight_scale", "dynamic", ("^",), (r"^lm_head$",))
    weight_only = target_params(ct_config(ct_args("block", False, block_structure=[64, 32]), None))
    assert (weight_only.block, weight_only.block_scale, weight_only.activation) == ((64, 32), "weight_scale", "none")


def test_an_fp8_block_target_loads_bit_for_bit_with_dynamic_group_inputs(fp8_block):
    """Every layer linear holds the stored e4m3 values and its bf16 weight_scale [ceil(out/128), ceil(in/128)] as
    the float32 of the same values, under compressed-tensors' name; inputs per group of block[1] channels."""
    folder, draft, block = fp8_block
    model = assemble(folder, draft)
    ckpt = load_file(str(folder / "model.safetensors"))
    assert fp8_modules(model.target) == set(MODULES)
    state = model.target.state_dict()
    assert state.keys() == ckpt.keys() and not any(k.endswith("_inv") for k in state)
    for k, v in ckpt.items():
        if k.endswith("_scale"):
            assert v.dtype == torch.bfloat16 and state[k].dtype == torch.float32, k
            assert torch.equal(state[k], v.to(torch.float32)), k
        else:
            assert state[k].dtype == v.dtype and torch.equal(bits(state[k]), bits(v)), k
    assert state["model.layers.0.mlp.down_proj.weight_scale"].shape == (1, 256 // block[1])
    assert state["model.layers.0.mlp.up_proj.weight_scale"].shape == (2, 128 // block[1])
    for name in MODULES:
        lin = model.target.get_submodule(name)
        assert (lin.scheme, lin.block, lin.scale_key, lin.activation, lin.native) == \
            ("block", block, "weight_scale", "dynamic", False)   # 128 or 256 wide: no native block product
    assert model.target.dims.config.quantization_config == FP8_BLOCKS[block]


def test_an_fp8_block_target_computes_the_logits_of_a_reference_quantizing_inputs_per_group(fp8_block):
    """float32 logits to 1e-4 of transformers' on the dequantized weights, each quantized linear's input
    fake-quantized per token and group of block[1] channels (what compressed-tensors and vLLM compute)."""
    folder, draft, block = fp8_block
    model = assemble(folder, draft)
    ids = torch.tensor([[5, 17, 3, 88, 41, 9, 60, 2]])
    with torch.no_grad():
        got = model.target.logits(model.target(ids, torch.arange(ids.shape[1])[None])[0])
    want = grouped_reference_logits(folder, ids, group=block[1])
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    assert (grouped_reference_logits(folder, ids, quantize_inputs=False) - want).abs().max() > 1e-3


def test_speculative_greedy_on_an_fp8_block_target_equals_its_target_only_greedy(fp8_block):
    model = assemble(*fp8_block[:2])
    for kw in ({"topk": 2, "steps": 3, "draft_tokens": 6}, {"topk": 1, "steps": 4, "draft_tokens": 5}):
        out = model.generate([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[], **kw)
        base = model.generate_baseline([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[])
        assert [o.token_ids for o in out] == [b.token_ids for b in base]


def test_an_fp8_block_target_with_partial_input_groups_is_refused_by_its_key(root, tmp_path, no_tensor_reads):
    folder = write_target(tmp_path / "narrow", "llama", num_hidden_layers=2, seed=1)
    quantize_folder(folder, r"^model\.layers\.\d+\.", quantization_config=True, block_scale="weight_scale")
    assert json.loads((folder / "config.json").read_text())["quantization_config"]["config_groups"]["group_0"][
        "input_activations"]["group_size"] == 128

    no_tensor_reads()
    with pytest.raises(UnsupportedTarget) as err:
        assemble(folder, root / "draft")
    assert "block_structure=[128, 128] is not supported with dynamic group inputs" in str(err.value), str(err.value)
