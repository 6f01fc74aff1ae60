"""FP8 quantization applied to a model: which Linears a setting quantizes (:func:`matching_linears`), the
registered quant method that quantizes a draft from its spec (:func:`fp8`), a target quantized from its own
``quantization_config`` (:func:`quantize_target`), and what the loader asks of a quantized model (the dtypes and
shapes its FP8 linears keep, :func:`stored_dtypes`, :func:`loadable_shapes`, :func:`row_blocks`). The FP8 linear
itself, its settings and its maths are in :mod:`draftsmith.components.quant`.

Isolation (invariant 26): a draft's quantization comes only from its spec's ``quant`` section; the target's only
from its own ``quantization_config``. Neither reads the other's.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable

import torch
from torch import nn

from draftsmith import limits
from draftsmith.components.quant import FP8Params, FP8Weight, dequantize, fp8_linear
from draftsmith.components.target_quant import refused, target_settings, tied_head
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.components.weights import RegexTimeout, search
from draftsmith.errors import Problem, SpecError, short, short_list


def matching_linears(module: nn.Module, params: FP8Params) -> dict[str, nn.Linear]:
    """The Linears of ``module`` that ``params`` quantize (not yet FP8), by canonical name; each pattern searched
    under the regex time bound (RegexTimeout past it: a pattern from a config or spec backtracking)."""
    return {name: sub for name, sub in module.named_modules()
            if isinstance(sub, nn.Linear) and not isinstance(sub, FP8Weight)
            and any(search(p, name) for p in params.modules) and not any(search(p, name) for p in params.exclude)}


def quantize_linears(linears: Mapping[str, nn.Linear], params: FP8Params) -> list[str]:
    """Make each of ``linears`` (:func:`matching_linears`) an FP8 linear; returns their canonical names."""
    for sub in linears.values():
        fp8_linear(sub, params)
    return list(linears)


def partial_groups(linears: Mapping[str, nn.Linear], params: FP8Params) -> dict[str, int]:
    """Input widths (by canonical name) of the ``linears`` ``params`` would quantize whose dynamic block inputs would
    end in a partial group of ``block[1]`` channels; {} for any other setting. No engine computes those:
    DeepSeek-V3's ``act_quant``, vLLM's and SGLang's ``per_token_group_quant_fp8`` assert a whole number of groups."""
    if params.scheme != "block" or params.activation != "dynamic":
        return {}
    return {name: sub.in_features for name, sub in linears.items() if sub.in_features % params.block[1]}


def _widths(partial: dict[str, int]) -> str:
    return short_list([f"{name} ({width} wide)" for name, width in partial.items()], 4, 200, quote=False)


def fp8(params: FP8Params, *, module: nn.Module | None = None, **_) -> list[str]:
    """The registered quant method: quantizes the draft ``module`` it is given (never anything else). Patterns
    that quantize no Linear of it are a SpecError at quant.modules (the section would be a silent no-op),
    listing the canonical names they are searched in; dynamic block inputs in partial groups, one at quant.block."""
    if module is None:
        return []
    linears = matching_linears(module, params)
    if partial := partial_groups(linears, params):
        g = math.gcd(*(sub.in_features for sub in linears.values()))
        raise SpecError("quant", [Problem(
            "quant.block", f"activation: dynamic quantizes block linears' inputs per token in groups of block[1] = "
            f"{params.block[1]} channels, and DeepSeek-V3, vLLM, SGLang and transformers refuse a partial group: "
            f"{len(partial)} linear(s) would end in one: {_widths(partial)}", found=list(params.block),
            allowed=f"a block[1] dividing {g} (every quantized linear's input width)",
            hint="Or activation: none, or quant.exclude those linears.")])
    done = quantize_linears(linears, params)
    if not done:
        linears = [n for n, m in module.named_modules() if isinstance(m, nn.Linear)]
        raise SpecError("quant", [Problem(
            "quant.modules", "quantize no Linear of the draft: the patterns are searched in canonical module names "
            "(after the weight rules), not the checkpoint's" + (f", and quant.exclude {short(list(params.exclude))} "
                                                                 "removes what they match" if params.exclude else ""),
            found=list(params.modules), allowed=f"patterns matching some of: {short_list(linears, 12, 120)}",
            hint=r"The default '^layers\.\d+\.' quantizes every decoder layer's Linear.")])
    return done


def _per_fp8_linear(module: nn.Module, facts: Callable[[FP8Weight], dict]) -> dict:
    """``facts`` of every FP8 linear in ``module`` (keyed by local name), keyed by canonical name."""
    out = {}
    for name, sub in module.named_modules():
        if isinstance(sub, FP8Weight):
            out |= {f"{name}.{k}" if name else k: v for k, v in facts(sub).items()}
    return out


def stored_dtypes(module: nn.Module) -> dict[str, torch.dtype]:
    """Canonical names whose checkpoint dtype is kept when loading (FP8 weights, their float32 scales)."""
    return _per_fp8_linear(module, FP8Weight.stored_dtypes)


def loadable_shapes(module: nn.Module) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Canonical names whose checkpoint tensor may have another shape than the module's (the same values): a load
    plan accepts these shapes too, and the FP8 linear reshapes them when it is filled."""
    return _per_fp8_linear(module, FP8Weight.loadable_shapes)


def row_blocks(module: nn.Module) -> dict[str, int]:
    """Canonical names of FP8 block scales and the weight rows one row of each covers (its block's rows): a split
    rule may cut such a scale only between whole blocks."""
    return _per_fp8_linear(module, FP8Weight.row_blocks)


def scale_faults(module: nn.Module, state: Mapping[str, torch.Tensor], dtype: torch.dtype) -> list[tuple[str, str]]:
    """(canonical name, what is wrong) for the FP8 linears of ``module`` whose loaded ``state`` (canonical names, as
    :func:`draftsmith.assembler.load.fill` has cast them) reads back wrong in ``dtype``, each a silent garbage
    product otherwise: a negative scale; a static input scale of 0 (the input is divided by it); a weight scale of 0
    over weights that are not 0 (they read as 0: a block of zeros may have a zero scale); a product past ``dtype``'s
    range (an FP8 weight times its scale, dequantized into float16, read as inf). Linears whose tensors are not in
    ``state`` (another module's) are not judged."""
    faults = []
    for name, sub in module.named_modules():
        if not isinstance(sub, FP8Weight):
            continue
        key = (lambda local: f"{name}.{local}" if name else local)
        for local in sub._inputs():
            if (s := state.get(key(local))) is not None and bool((s <= 0).any()):
                faults.append((key(local), f"an input scale of {short(s.min().item())}: the input is divided by it"))
        w, s = state.get(key("weight")), state.get(key(sub.scale_key))
        if w is None or s is None:
            continue
        if bool((s < 0).any()):
            faults.append((key(sub.scale_key), f"{int((s < 0).sum())} negative scale(s) (a quantizer writes amax / "
                                               "fmax, never below 0): the weights would read with their signs flipped"))
        elif bool((s == 0).any()) and bool(dequantize(w, (s == 0).float(), sub.scheme, sub.block).ne(0).any()):
            faults.append((key(sub.scale_key), "a scale of 0 over weights that are not 0: they would read as 0"))
        elif dtype.is_floating_point and torch.finfo(w.dtype).max * float(s.max()) > torch.finfo(dtype).max \
                and float(dequantize(w, s, sub.scheme, sub.block).abs().max()) > torch.finfo(dtype).max:
            faults.append((key("weight"), f"weights times their scales past {str(dtype).removeprefix('torch.')}'s "
                                          f"range (largest {torch.finfo(dtype).max:g}): they would read as inf; load "
                                          "it in bfloat16 or float32"))
    return faults


def weight_dtype(module: nn.Module) -> torch.dtype | None:
    """The dtype ``module``'s weight reads back in, without dequantizing an FP8 one (a shared target head is read
    on every draft step); None without a weight."""
    if isinstance(module, FP8Weight):
        return module.compute_dtype
    w = getattr(module, "weight", None)
    return None if w is None else w.dtype


def set_compute_dtype(module: nn.Module, dtype: torch.dtype) -> None:
    for sub in module.modules():
        if isinstance(sub, FP8Weight):
            sub.compute_dtype = dtype


def target_params(quantization_config: Mapping[str, Any] | None) -> FP8Params | None:
    """FP8 params for a target from ITS OWN config.json ``quantization_config`` (quant_method fp8: FineGrainedFP8,
    DeepSeek-V3, AutoFP8; compressed-tensors: llm-compressor's FP8; :mod:`draftsmith.components.target_quant`);
    None when it has none. Anything else is refused by name (UnsupportedTarget) rather than loaded as garbage."""
    return FP8Params(**target_settings(quantization_config)) if quantization_config else None


def quantize_target(model: nn.Module, cfg) -> list[str]:
    """Quantize a target built on meta as its own config says (and only so); dynamic block inputs that would end in
    a partial group, and a quantized lm_head tied to the embedding, are refused (UnsupportedTarget, before any
    tensor is read)."""
    params = target_params(getattr(cfg, "quantization_config", None))
    if params is None:
        return []
    try:
        linears = matching_linears(model, params)
    except RegexTimeout as e:   # a skip list's or target's regex, as the config wrote it
        raise UnsupportedTarget(f"target quantization_config: the module pattern {short(e.pattern)} (from its "
                                f"modules_to_not_convert, ignored_layers, targets or ignore) took more than "
                                f"{limits.REGEX_SECONDS} s on {short(e.name)}; allowed: regexes without nested or "
                                "overlapping repeats") from None
    if getattr(model, "tie", False) and "lm_head" in linears:
        raise tied_head(cfg.quantization_config)
    if partial := partial_groups(linears, params):
        key, how = (("weight_block_size", "activation_scheme dynamic") if params.block_scale == "weight_scale_inv"
                    else ("block_structure", "dynamic group inputs"))
        raise refused(key, list(params.block), "a block whose columns divide every quantized "
                      "linear's input width", f" with {how}: inputs are quantized per token in "
                      f"groups of {params.block[1]} channels, a partial group in {len(partial)} linear(s): "
                      f"{_widths(partial)} (DeepSeek-V3, vLLM, SGLang and transformers refuse one too)")
    return quantize_linears(linears, params)
