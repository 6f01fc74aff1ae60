"""What tests/components/test_fp8_targets.py, test_fp8_target_configs.py and test_fp8_block_targets.py share:
compressed-tensors and AutoFP8 quantization_configs as the published checkpoints write them (``ct_config``,
``CASES``), a tiny Llama stored as each case says, its dequantized float copy, and the reference logits
(transformers' Llama on that copy, each static linear's input fake-quantized with its input_scale, a dynamic one's
per token with its own max-abs / 448, as compressed-tensors computes on the CPU)."""
import json
import shutil

import torch
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.components.quant import FP8Weight
from draftsmith.testing import edit_config, write_target


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


def assemble(target, draft, spec="eagle1-llama"):
    return draftsmith.assemble(spec, target=target, draft=draft, dtype="float32")


def fp8_modules(module):
    return {n for n, m in module.named_modules() if isinstance(m, FP8Weight)}


def bits(t):
    return t.view(torch.uint8) if t.dtype == FP8 else t
