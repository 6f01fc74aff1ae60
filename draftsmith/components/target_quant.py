"""What a target's own config.json ``quantization_config`` asks of draftsmith's fp8 quant method: the settings of
:class:`draftsmith.components.quant.FP8Params`, as a plain dict (``quant_models.target_params`` builds them). Two
styles:

- ``quant_method: fp8``: transformers FineGrainedFP8 / DeepSeek-V3 (``weight_block_size``: block scales
  ``weight_scale_inv``, inputs quantized per token and group of ``weight_block_size[1]`` channels under
  ``activation_scheme: dynamic``, transformers' default, as vLLM, SGLang and DeepSeek-V3's fp8 gemm do), or AutoFP8
  (per-tensor ``weight_scale``; ``activation_scheme: static`` with ``input_scale``, or ``dynamic``: inputs
  quantized per token, as vLLM runs it on FP8 GPUs); every decoder layer's linear is quantized, lm_head never (as
  vLLM, where transformers would convert it under a skip list that does not name it), nor those
  ``modules_to_not_convert`` names (else ``ignored_layers``, as transformers reads them), matched as transformers'
  ``should_convert_module`` matches them (a regex at the start of the name up to a module boundary, or a name
  suffix as written). Refused: ``modules_to_convert`` (FP8 embedding tables) and ``scale_fmt: ue8m0``;
- ``quant_method: compressed-tensors`` (llm-compressor's FP8, FP8-dynamic): config groups that all state one
  setting: weights float, 8 bits, symmetric, per tensor (``weight_scale`` [1]) or per channel ([out, 1]); inputs
  none, dynamic per token, or static per tensor (``input_scale`` [1]). ``targets`` and ``ignore`` are matched as
  compressed-tensors matches them: ``re:X`` is the regex X matched at the start of a module name, ``Linear`` every
  linear, another entry the exact module name (a class name other than ``Linear`` is refused as a target).
  llm-compressor's FP8_BLOCK too: weights ``strategy: block`` with ``block_structure`` [b0, b1] (scales
  ``weight_scale`` [ceil(out/b0), ceil(in/b1)], the block scheme under compressed-tensors' name), inputs null or
  dynamic ``strategy: group`` with ``group_size`` b1 (per token and group of b1 channels, as vLLM computes them).

Anything else (other methods, int or 4-bit groups, group weight strategies, asymmetric, KV-cache, sparse or
transformed checkpoints) is refused before the model is built, naming the key, what it holds and what is read.
Only the target's own config is read here (invariant 26).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from draftsmith import limits
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.components.weights import pattern_problem
from draftsmith.errors import short

LAYERS = r"^model\.layers\.\d+\."   # what quant_method fp8 quantizes: every decoder layer's linears (never lm_head)
CT_FORMATS = ("float-quantized", "naive-quantized")   # both store the fp8 values as they are
CT_INPUTS = {("token", True): "dynamic", ("tensor", False): "static"}   # (strategy, dynamic) -> FP8Params activation
CT_OFF = ("kv_cache_scheme", "sparsity_config", "transform_config")     # what a checkpoint draftsmith reads leaves out
BATCH_SCALE = ("one input scale for the whole batch, its max-abs, so verifying several tokens would quantize each "
               "differently from decoding it alone (not lossless)")
METHODS = ("fp8 (e4m3: weight_block_size block scales with activation_scheme dynamic, or per-tensor weight_scale "
           "with static or dynamic) or compressed-tensors (float-quantized FP8)")

# a method draftsmith does not read, whose checkpoints have a known way out: (why, the fix)
UNREAD_METHODS = {"mxfp4": (
    " (4-bit MXFP4 experts: *_blocks / *_scales tensors, which draftsmith does not dequantize)",
    ". Fix: use the checkpoint's bf16 form (gpt-oss: e.g. lmsys/gpt-oss-20b-bf16), or write one with transformers: "
    "AutoModelForCausalLM.from_pretrained(folder, quantization_config=Mxfp4Config(dequantize=True), "
    "dtype=torch.bfloat16).save_pretrained(out)")}


def refused(key: str, found: Any, allowed: str, why: str = "") -> UnsupportedTarget:
    return UnsupportedTarget(f"target quantization_config {key}={short(found)} is not supported{why}; allowed: "
                             f"{allowed}")


def target_settings(quantization_config: Mapping[str, Any]) -> dict[str, Any]:
    """FP8Params settings for a target's ``quantization_config`` (not empty), or UnsupportedTarget."""
    method = quantization_config.get("quant_method")
    readers = {"fp8": fp8_settings, "compressed-tensors": compressed_tensors_settings}
    if not isinstance(method, str) or method not in readers:   # a list or dict is no key of readers (unhashable)
        why, fix = UNREAD_METHODS.get(method, ("", "")) if isinstance(method, str) else ("", "")
        raise UnsupportedTarget(f"{refused('quant_method', method, METHODS, why)}{fix}")
    return readers[method](quantization_config)


def tied_head(qc: Mapping[str, Any]) -> UnsupportedTarget:
    """A config that quantizes lm_head on a target whose config ties it to the embedding (tie_word_embeddings): one
    tensor cannot be both the float embedding and an FP8 head, and a tied target's own lm_head in its files is a
    reading transformers 5 takes (the file's head) and 4 does not (the embedding), so neither is the target's own."""
    return refused("ignore", qc.get("ignore"), "tie_word_embeddings false in config.json where the files hold a "
                   "quantized lm_head (the checkpoint's own head), or an ignore list naming lm_head where they hold "
                   "none (the tied head is the embedding)", " with tie_word_embeddings true: lm_head is quantized "
                   "but tied to the embedding, model.embed_tokens, which is not")


def fp8_settings(qc: Mapping[str, Any]) -> dict[str, Any]:
    """``quant_method: fp8`` (transformers FineGrainedFP8, DeepSeek-V3, AutoFP8)."""
    if (fmt := qc.get("fmt", "e4m3")) != "e4m3":
        raise refused("fmt", fmt, "'e4m3'")
    if (kv := qc.get("kv_cache_scheme")) is not None:
        raise refused("kv_cache_scheme", kv, "null", " (a quantized KV cache: draftsmith's holds the model dtype)")
    if (scale_fmt := qc.get("scale_fmt")) not in (None, "float"):
        raise refused("scale_fmt", scale_fmt, "null or 'float'", " (ue8m0 rounds each input scale up to a power of "
                      "two; draftsmith computes float scales, so its logits would not be the checkpoint's)")
    if convert := qc.get("modules_to_convert"):   # transformers: modules converted besides every Linear
        raise refused("modules_to_convert", convert, "null or empty (every Linear is converted regardless)",
                      " (it names the embedding tables stored in FP8, transformers' FP8Embedding with one "
                      "weight_scale each; draftsmith computes no FP8 embeddings)")
    if (block := qc.get("weight_block_size")) not in (None, []):   # [] or null: one scale per tensor
        block = block_structure("weight_block_size", block)   # as compressed-tensors' block_structure is checked
    activation = fp8_activation(qc.get("activation_scheme", "dynamic"), block)
    # transformers reads ignored_layers only where modules_to_not_convert is null (vLLM the other way round: where
    # both are given and differ, the load names the tensors one of them would have left in float)
    key = "modules_to_not_convert" if qc.get("modules_to_not_convert") is not None else "ignored_layers"
    skip = [skip_pattern(f"{key}.{i}", entry) for i, entry in enumerate(name_list(key, qc.get(key)))]
    return {"scheme": "block" if block else "tensor", "block": tuple(block or (128, 128)), "modules": (LAYERS,),
            "exclude": (r"^lm_head$", *skip), "activation": activation}


def fp8_activation(scheme: Any, block: Any) -> str:
    """FP8Params activation for ``activation_scheme``: dynamic with block scales (per token and group of block[1]
    channels) or without (AutoFP8's FP8-dynamic: per token, as vLLM runs it with its CUTLASS kernels, the GPUs FP8
    is made for; AutoFP8's own model and vLLM's fallback take one scale per batch, which no lossless verification
    can: a token's input must not depend on the others'), static without blocks (the per-tensor input_scale)."""
    if scheme not in ("dynamic", "static"):
        raise refused("activation_scheme", scheme, "'dynamic' or 'static' (static without weight_block_size)")
    if scheme == "static" and block:
        raise refused("activation_scheme", scheme, "'dynamic' with weight_block_size, or 'static' without (a "
                      "per-tensor input_scale)", " with weight_block_size (static input scales are per tensor)")
    return scheme


def name_list(key: str, names: Any) -> list:
    if names is not None and not isinstance(names, list):
        raise refused(key, names, "a list of module names, name prefixes and suffixes, or regexes")
    return names or []


def skip_pattern(key: str, entry: Any) -> str:
    """A regex searched in module names for a modules_to_not_convert / ignored_layers entry, matching what
    transformers' ``should_convert_module`` skips: the entry as a regex matched at the start of the name up to a
    module boundary ('model.layers.1' skips model.layers.1.*, not model.layers.11.*), or the name ending with the
    entry as written ('down_proj'; 'mlp.gate', not 'mlp.gate_proj')."""
    if not isinstance(entry, str):
        raise refused(key, entry, "a module name, name prefix or suffix, or a regex")
    return searchable(key, entry, rf"^(?:{entry})(?:(?<=\.)|(?=\.|$))|{re.escape(entry)}$")


def searchable(key: str, entry: str, pattern: str) -> str:
    """``pattern`` (made of a config's ``entry``), or UnsupportedTarget at ``key`` where draftsmith would not search
    it (pattern_problem: an invalid or backtracking regex)."""
    if (why := pattern_problem(pattern)) is not None:
        raise refused(key, entry, "a regex draftsmith can search", f" ({why})")
    return pattern


def compressed_tensors_settings(qc: Mapping[str, Any]) -> dict[str, Any]:
    """``quant_method: compressed-tensors``: every config group read, and one setting for them all."""
    for key in CT_OFF:
        if qc.get(key):
            raise refused(key, qc[key], "null or empty", " (draftsmith computes neither a quantized KV cache, nor "
                          "sparse weights, nor transforms)")
    groups = qc.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise refused("config_groups", groups, "a mapping of one or more groups")
    read = {name: group_settings(f"config_groups.{name}", group, qc.get("format")) for name, group in groups.items()}
    settings = {name: (s["scheme"], s["activation"], *s.get("block", ())) for name, s in read.items()}
    if len(set(settings.values())) > 1:
        raise refused("config_groups", {n: "/".join(map(str, s)) for n, s in settings.items()}, "groups that all "
                      "state one weight strategy (and block) and one input setting", " (one FP8 setting holds every "
                      "linear of the target)")
    ignore = qc.get("ignore") or []
    if not isinstance(ignore, list):
        raise refused("ignore", ignore, "a list of module names and 're:' regexes")
    first = next(iter(read.values()))
    block = {"block": first["block"], "block_scale": "weight_scale"} if first["scheme"] == "block" else {}
    return {"scheme": first["scheme"], "activation": first["activation"], **block,
            "modules": tuple(dict.fromkeys(p for s in read.values() for p in s["modules"])),
            "exclude": tuple(module_pattern(f"ignore.{i}", e) for i, e in enumerate(ignore))}


def group_settings(where: str, group: Any, top_format: Any) -> dict[str, Any]:
    """One config group's weight scheme, input setting and module patterns."""
    if not isinstance(group, Mapping):
        raise refused(where, group, "a mapping with targets, weights and input_activations")
    fmt = group.get("format") or top_format
    if fmt not in CT_FORMATS:
        raise refused(f"{where}.format" if group.get("format") else "format", fmt, " or ".join(CT_FORMATS),
                      " (draftsmith reads FP8 weights stored as e4m3 values)")
    weights = group.get("weights")
    float8(f"{where}.weights", weights)
    if (dynamic := weights.get("dynamic", False)) is not False:
        raise refused(f"{where}.weights.dynamic", dynamic, "false (stored weight scales)")
    strategy = weights.get("strategy", "tensor")
    if strategy not in ("tensor", "channel", "block"):
        raise refused(f"{where}.weights.strategy", strategy, "tensor (weight_scale [1]), channel (weight_scale "
                      "[out, 1]) or block (weight_scale [ceil(out/b0), ceil(in/b1)], block_structure [b0, b1])")
    if (out := group.get("output_activations")) is not None:
        raise refused(f"{where}.output_activations", out, "null")
    targets = group.get("targets")
    if not isinstance(targets, list) or not targets:
        raise refused(f"{where}.targets", targets, "a list of module names, 're:' regexes or 'Linear'")
    modules = tuple(module_pattern(f"{where}.targets.{i}", t, target=True) for i, t in enumerate(targets))
    inputs = (f"{where}.input_activations", group.get("input_activations"))
    if strategy != "block":
        return {"scheme": strategy, "activation": input_setting(*inputs), "modules": modules}
    block = block_structure(f"{where}.weights.block_structure", weights.get("block_structure"))
    return {"scheme": "block", "block": block, "activation": block_inputs(*inputs, block), "modules": modules}


def block_structure(key: str, block: Any) -> tuple[int, int]:
    """A block weight strategy's [rows, columns] per scale."""
    if not (isinstance(block, list) and len(block) == 2
            and all(type(b) is int and 1 <= b <= limits.WIDTH for b in block)):
        raise refused(key, block, f"[rows, columns] per weight scale, each 1 to {limits.WIDTH}")
    return tuple(block)


def block_inputs(key: str, args: Any, block: tuple[int, int]) -> str:
    """FP8Params activation for the input_activations of a group with block weights: none, or dynamic per token and
    group of block[1] channels (FP8_BLOCK's; the one input quantization draftsmith's block scheme computes)."""
    if args is None:
        return "none"
    float8(key, args)
    got = {k: args.get(k, d) for k, d in (("strategy", "tensor"), ("dynamic", False), ("group_size", None))}
    if got["strategy"] == "group" and got["dynamic"] is True and got["group_size"] != block[1]:
        raise refused(f"{key}.group_size", got["group_size"], f"{block[1]} (block_structure[1])", " with block "
                      "weights (draftsmith quantizes a block linear's inputs per token in groups of block[1] channels)")
    if got != {"strategy": "group", "dynamic": True, "group_size": block[1]} or type(got["dynamic"]) is not bool:
        raise refused(key, got, f"null or {{strategy: group, group_size: {block[1]}, dynamic: true}} with block "
                      "weights (inputs per token and group of block_structure[1] channels)")
    return "dynamic"


def float8(key: str, args: Any) -> None:
    """Refuse quantization args that are not symmetric 8-bit floats (the e4m3 values draftsmith computes with)."""
    if not isinstance(args, Mapping):
        raise refused(key, args, "a mapping (num_bits: 8, type: float, symmetric: true)")
    for name, default, want in (("type", "int", "float"), ("num_bits", 8, 8), ("symmetric", True, True)):
        if (got := args.get(name, default)) != want or type(got) is not type(want):
            raise refused(f"{key}.{name}", got, short(want), " (draftsmith reads symmetric fp8 e4m3: float, 8 bits, "
                          "no zero point)")


def input_setting(key: str, args: Any) -> str:
    """FP8Params activation for a group's input_activations: none, dynamic per token or static per tensor."""
    if args is None:
        return "none"
    float8(key, args)
    got = (args.get("strategy", "tensor"), args.get("dynamic", False))
    if type(got[0]) is not str or type(got[1]) is not bool or got not in CT_INPUTS:   # types first: unhashable
        raise refused(key, {"strategy": got[0], "dynamic": got[1]}, "null, {strategy: token, dynamic: true} or "
                      "{strategy: tensor, dynamic: false} (with input_scale [1] tensors)",
                      f" (per-tensor dynamic inputs: {BATCH_SCALE})" if got == ("tensor", True) else "")
    return CT_INPUTS[got]


def module_pattern(key: str, entry: Any, target: bool = False) -> str:
    """A regex searched in module names for a targets / ignore entry, matched as compressed-tensors matches it
    (``utils/match.py``): 're:X' is the regex X matched at the start of the name, 'Linear' any linear (a class in its
    MRO), another entry the exact module name. Another class name ('Embedding', 'LlamaMLP') is refused as a target
    (draftsmith quantizes Linear layers only); as an ignore entry it excludes none of a target's linears (every one
    a plain Linear), as its exact name does."""
    if not isinstance(entry, str):
        raise refused(key, entry, "a module name, a 're:' regex or 'Linear'")
    if entry == "Linear":
        return "^"
    if target and entry.isidentifier() and entry[0].isupper():
        raise refused(key, entry, "'Linear', a module name or a 're:' regex", " (compressed-tensors matches a class "
                      "name against every module's classes; draftsmith quantizes Linear layers only)")
    if not entry.startswith("re:"):
        return f"^{re.escape(entry)}$"
    return searchable(key, entry, f"^(?:{entry.removeprefix('re:')})")
