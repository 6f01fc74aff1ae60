"""What `inspect` reads of FP8 weights: the quant settings a draft's stored scales show (scheme, block size and the
modules they sit on), so that the spec it proposes loads them (a family spec says `quant: none` unless FP8 is what
the family is, as `eagle1-llama-fp8`)."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from draftsmith.assembler.checkpoint import TensorInfo
from draftsmith.components.quant import scale_name

SCALES = tuple(f".{scale_name(scheme)}" for scheme in ("block", "tensor"))   # the names the fp8 quant method loads


def fp8_quant(spec, registry, config: Mapping[str, Any], infos: dict[str, TensorInfo],
              quant: Mapping[str, Any]) -> tuple[dict[str, Any], str] | None:
    """(the spec's ``quant`` section, a note) for a draft whose own tensors (those its rules do not ignore) carry FP8
    scales: the scheme and block they show; for a spec without quantization also ``method: fp8`` and ``modules``,
    the canonical modules the scales sit on (layer numbers as \\d+). None when the draft holds no scales."""
    from draftsmith.assembler.build import rule_set
    from draftsmith.assembler.config import flatten_draft_config

    rules = rule_set(spec, registry, flatten_draft_config(config))
    # by canonical name, whatever the layout calls them (Mistral's eagle_linear.qscale_weight is fc.weight_scale)
    canonical = {c: info for n, info in infos.items() if not rules.is_ignored(n)
                 and (c := rules.to_canonical(n)[0]) is not None}
    scales = [c for c in canonical if c.endswith(SCALES)]
    mine = {n: canonical[n] for s in scales for n in (s, weight_of(s)) if n in canonical}
    if not scales or (shown := fp8_scheme(mine, config)) is None:
        return None
    settings, note = shown
    if quant.get("method") == "fp8":
        return dict(quant) | settings, note
    modules = sorted({module_pattern(c.rsplit(".", 1)[0]) for c in scales})
    return ({"method": "fp8", **settings, "modules": modules, "activation": "none"},
            f"quant: fp8 on {len(modules)} module pattern(s) (the stored scales); " + note)


def weight_of(scale: str) -> str:
    return scale.removesuffix("_scale_inv").removesuffix("_scale")


def module_pattern(module: str) -> str:
    """'layers.0.self_attn.q_proj' -> '^layers\\.\\d+\\.self_attn\\.q_proj$': every layer's same module."""
    return "^" + r"\.".join(r"\d+" if part.isdigit() else re.escape(part) for part in module.split(".")) + "$"


def fp8_scheme(infos: dict[str, TensorInfo], config: Mapping[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The FP8 quant settings the stored scales show (block: ``weight_scale_inv``, its block size the config's
    ``quantization_config.weight_block_size`` or else read from the scale and weight shapes; tensor: one
    ``weight_scale`` value; channel: one per output row), or None when they show none or several."""
    shown, fits = set(), [(1, math.inf), (1, math.inf)]   # per axis: the block sizes every scale's shape allows
    for name, info in infos.items():
        if name.endswith(".weight_scale_inv"):
            shown.add("block")
            weight = infos.get(name.removesuffix("_scale_inv"))
            if weight is not None and len(weight.shape) == len(info.shape) == 2:
                fits = [_both(fit, _blocks(n, c)) for fit, n, c in zip(fits, weight.shape, info.shape)]
        elif name.endswith(".weight_scale"):
            shown.add("tensor" if math.prod(info.shape) == 1 else "channel")
    if len(shown) != 1:
        return None
    (scheme,) = shown
    if scheme != "block":
        return {"scheme": scheme}, f"quant.scheme: {scheme} (the stored scales: weight_scale)"
    said = (config.get("quantization_config") or {}).get("weight_block_size")
    if isinstance(said, list) and len(said) == 2 and all(isinstance(b, int) and lo <= b <= hi
                                                          for b, (lo, hi) in zip(said, fits)):
        return {"scheme": scheme, "block": said}, f"quant: block {said[0]}x{said[1]} (the config's weight_block_size)"
    if any(lo > hi for lo, hi in fits):
        return {"scheme": scheme}, "quant.scheme: block (weight_scale_inv; no block size fits every scale's shape)"
    block = [_likeliest(lo, hi) for lo, hi in fits]
    open_ = [f"{lo}..{'' if hi == math.inf else int(hi)}" for (lo, hi), b in zip(fits, block) if lo != hi and b != 128]
    guess = f"; a guess: the shapes allow block sizes {' x '.join(open_)}" if open_ else ""
    return {"scheme": scheme, "block": block}, f"quant: block {block[0]}x{block[1]} (weight_scale_inv and its " \
                                                f"shapes{guess})"


def _blocks(n: int, count: int) -> tuple[float, float]:
    """The block sizes b (as an interval) that cut n rows into ``count`` blocks: ceil(n / b) == count."""
    if count < 1:
        return 1, 0
    return -(-n // count), (math.inf if count == 1 else -(-n // (count - 1)) - 1)


def _both(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return max(a[0], b[0]), min(a[1], b[1])


def _likeliest(lo: float, hi: float) -> int:
    """128 (every published FP8 block checkpoint's) when it fits, else the smallest power of two that does, else lo."""
    if lo <= 128 <= hi:
        return 128
    power = 1 << max(int(lo) - 1, 0).bit_length()
    return power if power <= hi else int(lo)
