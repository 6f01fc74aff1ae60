"""FP8 (e4m3) checkpoints for tests: quantize the matching linear weights of a folder in place, the way the
published FP8 checkpoints store them (``weight`` as F8_E4M3 plus ``weight_scale`` or, for 128x128 blocks,
``weight_scale_inv``, or ``weight_scale`` as compressed-tensors' FP8_BLOCK stores them), and write a float copy
holding the dequantized values (the reference)."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.components.quant import FP8, dequantize, quantize, scale_name


def quantize_folder(folder: str | Path, pattern: str, *, scheme: str = "block", block: tuple[int, int] = (128, 128),
                    quantization_config: bool = False, block_scale: str = "weight_scale_inv") -> list[str]:
    """Replace each 2-D ``*.weight`` whose name matches ``pattern`` by FP8 + its scale; with
    ``quantization_config`` also declare it in config.json (as an FP8 target does: :func:`target_config`). Returns
    the names. ``block_scale``: a block scale's stored name (weight_scale: compressed-tensors' FP8_BLOCK)."""
    folder = Path(folder)
    src = load_file(str(folder / "model.safetensors"))
    out, done = {}, []
    for name, t in src.items():
        if name.endswith(".weight") and t.dim() == 2 and re.search(pattern, name):
            w, s = quantize(t, scheme, block)
            out[name], out[name.removesuffix("weight") + scale_name(scheme, block_scale)] = w, s
            done.append(name)
        else:
            out[name] = t
    save_safetensors(out, folder)
    if quantization_config:
        cfg = json.loads((folder / "config.json").read_text())
        cfg["quantization_config"] = target_config(scheme, block, [n.removesuffix(".weight") for n in done],
                                                     block_scale)
        (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return done


def target_config(scheme: str, block: tuple[int, int], modules: list[str],
                  block_scale: str = "weight_scale_inv") -> dict:
    """The quantization_config of a target so quantized: FineGrainedFP8's for blocks (inputs quantized per token and
    group of block[1] channels), or with ``block_scale`` weight_scale compressed-tensors' FP8_BLOCK (the same inputs),
    else compressed-tensors weight-only FP8 (W8A16: full-precision inputs); compressed-tensors' on exactly
    ``modules``."""
    if scheme == "block" and block_scale == "weight_scale_inv":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": list(block)}
    weights = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": scheme, "dynamic": False}
    inputs = None
    if scheme == "block":
        weights |= {"block_structure": list(block), "group_size": None}
        inputs = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "group", "dynamic": True,
                  "group_size": block[1]}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": [],
            "config_groups": {"group_0": {"targets": modules, "weights": weights, "input_activations": inputs}}}


def dequantized_copy(src: str | Path, dst: str | Path, *, scheme: str = "block",
                     block: tuple[int, int] = (128, 128), block_scale: str = "weight_scale_inv") -> Path:
    """A float32 copy of an FP8 folder: each weight replaced by its dequantized value, scales and
    quantization_config dropped (transformers and draftsmith read it as an ordinary checkpoint)."""
    src, dst = Path(src), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, dst / f.name)
    t = load_file(str(src / "model.safetensors"))
    suffix = scale_name(scheme, block_scale)
    out = {}
    for name, v in t.items():
        if name.endswith(suffix):
            continue
        scale = t.get(name.removesuffix("weight") + suffix) if name.endswith(".weight") else None
        out[name] = dequantize(v, scale, scheme, block) if scale is not None else v
    save_safetensors(out, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg.pop("quantization_config", None)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


def group_fake_quant(x: torch.Tensor, group: int) -> torch.Tensor:
    """DeepSeek-V3's act_quant (vLLM's and SGLang's per_token_group_quant_fp8) written out, a reference for the
    dynamic block path: each token's channels in consecutive groups of ``group``, each divided by its own max-abs /
    448, cast to e4m3 and multiplied back."""
    out = torch.empty(x.shape, dtype=torch.float32)
    for start in range(0, x.shape[-1], group):
        part = x[..., start:start + group].to(torch.float32)
        scale = part.abs().amax(-1, keepdim=True) / 448
        out[..., start:start + group] = (part / scale).to(FP8).to(torch.float32) * scale
    return out.to(x.dtype)
