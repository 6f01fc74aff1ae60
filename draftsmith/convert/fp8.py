"""What `inspect` reads of FP8 weights: the quant settings a draft's stored scales show (scheme, block size, the name
block scales are stored under: ``weight_scale_inv``, or ``weight_scale`` as compressed-tensors' block strategy stores
them, ``block_scale: weight_scale``; and the modules they sit on), so that the spec it proposes loads them (a family
spec says `quant: none` unless FP8 is what the family is, as `eagle1-llama-fp8`). Mistral's own scale names
(`<linear>.qscale_weight`) become weight rules where the family spec's rules do not already read them as
`weight_scale`; static activation scales (`input_scale`, Mistral's `qscale_act`) are ignored, said: the proposal keeps
`activation: none` (a spec saying `activation: static` loads `input_scale`; proposing it would change what a family
spec's drafts compute)."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from draftsmith.assembler.checkpoint import TensorInfo
from draftsmith.components.quant import scale_name

SCALES = tuple(f".{scale_name(scheme)}" for scheme in ("block", "tensor"))   # the names the fp8 quant method loads
MISTRAL_WEIGHT_SCALE = ".qscale_weight"                                       # Mistral's name of a weight scale
ACTIVATION_SCALES = (".input_scale", ".qscale_act")                           # static activation scales


@dataclass
class FP8Reading:
    """What a proposed spec takes from a draft's stored FP8 scales: its ``quant`` section (None: the spec's stays),
    weight rules to put before the spec's own, ``weights.ignore`` patterns to add, and a note for each."""
    quant: dict[str, Any] | None = None
    rules: list[dict[str, Any]] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def fp8_reading(spec, registry, config: Mapping[str, Any], infos: dict[str, TensorInfo],
                quant: Mapping[str, Any]) -> FP8Reading | None:
    """The settings a draft whose own tensors (those its rules do not ignore) carry FP8 scales needs: the scheme and
    block they show; ``method: fp8`` and ``modules`` (the canonical modules the scales sit on, layer numbers as
    \\d+) for a spec without quantization, or for one whose modules miss a module with scales or take one without;
    a rule for each Mistral ``qscale_weight`` the spec's rules do not turn into ``weight_scale``; an ignore pattern
    for static activation scales. None when the draft holds no scales."""
    from draftsmith.assembler.build import rule_set
    from draftsmith.assembler.config import flatten_draft_config
    from draftsmith.components.weights import RegexRule, RuleSet

    rules = rule_set(spec, registry, flatten_draft_config(config))
    own = {n: info for n, info in infos.items() if not rules.is_ignored(n)}
    found = FP8Reading()
    for n in sorted(own):   # Mistral's weight scales on linears the spec's rules rename but not as a scale
        if n.endswith(MISTRAL_WEIGHT_SCALE) and not str(rules.to_canonical(n)[0]).endswith(SCALES):
            rule = scale_rule(n.removesuffix(MISTRAL_WEIGHT_SCALE), rules)
            if rule is not None and rule not in found.rules:
                found.rules.append(rule)
    acts = sorted({suffix for n in own for suffix in ACTIVATION_SCALES if n.endswith(suffix)})
    found.ignore = [re.escape(suffix) + "$" for suffix in acts]
    if found.rules or found.ignore:
        rules = RuleSet([*map(RegexRule.model_validate, found.rules), *rules.rules], (*rules.ignore, *found.ignore))
    # by canonical name, whatever the layout calls them (Mistral's eagle_linear.qscale_weight is fc.weight_scale)
    # (a fused tensor's every part: a split rule reads qkv_proj.weight_scale as q's, k's and v's)
    canonical = {c: info for n, info in infos.items() if not rules.is_ignored(n)
                 for c in rules.to_parts(n)[0] or ()}
    scales = [c for c in canonical if c.endswith(SCALES)]
    if not scales and not found.ignore:
        return None
    if found.rules:
        found.notes.append(f"weights.rules: Mistral's qscale_weight read as weight_scale on {len(found.rules)} "
                           "module pattern(s) (the family's rules do not)")
    if found.ignore:
        count = sum(n.endswith(tuple(acts)) for n in own)
        found.notes.append(f"weights.ignore: the {count} static activation scale(s) ({', '.join(a[1:] for a in acts)}"
                           "): the proposal keeps activation: none (full-precision inputs; dynamic quantizes them per "
                           "token, per group of block[1] channels under block scales); quant.activation: static "
                           "loads input_scale tensors the rules do not ignore")
    if dropped := sorted(n for n in infos if n not in own and n.endswith(ACTIVATION_SCALES)):   # the spec ignores
        found.notes.append(f"weights.ignore: the family's rules drop {len(dropped)} static activation scale(s) "
                           f"({', '.join(dropped[:3])}{' ...' * (len(dropped) > 3)}): its linears take "
                           "full-precision inputs (the spec's own choice)")
    if not scales:
        return found
    mine = {n: canonical[n] for s in scales for n in (s, weight_of(s)) if n in canonical}
    if (shown := fp8_scheme(mine, config)) is None:
        kinds = sorted({kind_name(*scale_kind(canonical, s)) for s in scales})
        found.notes.append(f"quant: the stored scales show several schemes ({', '.join(kinds)}); one fp8 quant "
                           "section holds one, so no spec draftsmith proposes loads them all")
        return found
    settings, note = shown
    found.notes += scalar_notes(scales, canonical)
    scaled = sorted({c.rsplit(".", 1)[0] for c in scales})
    linears = {c.removesuffix(".weight") for c, info in canonical.items() if c.endswith(".weight")
               and len(info.shape) == 2} | set(scaled)
    if quant.get("method") == "fp8":   # the stored scales' name decides block_scale (settings say it unless default)
        section = {k: v for k, v in quant.items() if k != "block_scale"} | settings
        if quantized(section, linears) == set(scaled):
            found.quant, found.notes = section, [*found.notes, note]
            return found
        section["exclude"] = []
    else:
        section = {"method": "fp8", **settings, "activation": "none"}
        if settings["scheme"] == "block":
            section["activation"], why = block_activation(settings.get("block"), scaled, canonical, config)
            found.notes += [why] if why else []
    modules = module_patterns(scaled, linears)
    found.quant = section | {"modules": modules}
    found.notes.append(f"quant: fp8 on {len(modules)} module pattern(s) (the stored scales, activation: "
                       f"{section['activation']}); " + note)
    return found


def block_activation(block: list[int] | None, scaled: list[str], canonical: Mapping[str, TensorInfo],
                     config: Mapping[str, Any] | None = None) -> tuple[str, str | None]:
    """The activation proposed for block scales: dynamic (inputs quantized per token and group of block[1]
    channels, as every engine runs a block fp8 linear: DeepSeek-V3's act_quant, vLLM's and SGLang's per-token-group
    quant) where block[1] divides every scaled linear's input width, as those engines assert; else none, with why.
    None too, with why, where the config's compressed-tensors groups quantize the block weights alone
    (``input_activations`` null: engines compute those linears on full-precision inputs)."""
    if block is None:
        return "none", None
    if weights_only(config or {}):
        return "none", ("quant.activation: none (full-precision inputs): the config's compressed-tensors groups "
                        "quantize the weights only (input_activations null)")
    widths = {m: canonical[f"{m}.weight"].shape[-1] for m in scaled if f"{m}.weight" in canonical}
    if odd := sorted(m for m, w in widths.items() if w % block[1]):
        return "none", (f"quant.activation: none (full-precision inputs): block[1] = {block[1]} does not divide the "
                        f"input width of {len(odd)} scaled linear(s), e.g. {odd[0]} ({widths[odd[0]]} wide), so its "
                        "inputs cannot be quantized per group as engines do (they refuse such a width)")
    return "dynamic", None


def weights_only(config: Mapping[str, Any]) -> bool:
    """Whether a config's compressed-tensors groups of block weights all leave inputs unquantized."""
    groups = _block_groups(config)
    return bool(groups) and all(g.get("input_activations") is None for g in groups)


def _block_groups(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The compressed-tensors config groups whose weights are of block strategy ([] for any other config)."""
    qc = config.get("quantization_config")
    groups = qc.get("config_groups") if isinstance(qc, Mapping) else None
    return [g for g in (groups.values() if isinstance(groups, Mapping) else ()) if isinstance(g, Mapping)
            and isinstance(g.get("weights"), Mapping) and g["weights"].get("strategy") == "block"]


def quantized(section: Mapping[str, Any], modules: set[str]) -> set[str]:
    """The modules a quant section's ``modules`` / ``exclude`` patterns take."""
    take, skip = section.get("modules") or [r"^layers\.\d+\."], section.get("exclude") or []
    return {m for m in modules if any(re.search(p, m) for p in take) and not any(re.search(p, m) for p in skip)}


def module_patterns(scaled: list[str], linears: set[str]) -> list[str]:
    """A pattern per scaled module, every layer's same module where no such module lacks scales, else that one."""
    out = []
    for module in scaled:
        pattern = module_pattern(module)
        if any(re.search(pattern, m) for m in linears - set(scaled)):
            pattern = "^" + re.escape(module) + "$"
        if pattern not in out:
            out.append(pattern)
    return out


def scalar_notes(scales: list[str], canonical: Mapping[str, TensorInfo]) -> list[str]:
    """A note when per-tensor scales are stored 0-d (as several quantizers write them): draftsmith's fp8
    method holds a per-tensor scale as [1] and loads a 0-d one as that same value."""
    scalars = [s for s in scales if canonical[s].shape == ()]
    if not scalars:
        return []
    return [f"quant: {len(scalars)} weight_scale tensor(s) are stored 0-d (e.g. {scalars[0]}); draftsmith's fp8 "
            "method loads each as the per-tensor scale [1] holding the same value"]


def scale_rule(module: str, rules) -> dict[str, Any] | None:
    """A weight rule reading Mistral's ``<module>.qscale_weight`` as ``<canonical module>.weight_scale`` (with its
    inverse), numbers as any layer, or None when the module's weight has no canonical name."""
    canonical = rules.to_canonical(f"{module}.weight")[0]
    if canonical is None or not canonical.endswith(".weight"):
        return None
    target = canonical.removesuffix(".weight")
    numbers = [part for part in module.split(".") if part.isdigit()]

    def pattern(name: str) -> str:
        return r"\.".join(r"(\d+)" if part.isdigit() and part in numbers else re.escape(part)
                          for part in name.split("."))

    def template(name: str, order: list[str]) -> str:   # each number as the group of the same number in `order`
        return ".".join(f"\\{order.index(part) + 1}" if part.isdigit() and part in order else part
                        for part in name.split("."))

    target_numbers = [part for part in target.split(".") if part.isdigit() and part in numbers]
    if len(set(numbers)) != len(numbers) or sorted(target_numbers) != sorted(numbers):   # this module alone
        return {"match": f"^{re.escape(module)}{re.escape(MISTRAL_WEIGHT_SCALE)}$", "replace": f"{target}.weight_scale",
                "inverse": [f"^{re.escape(target)}\\.weight_scale$", f"{module}{MISTRAL_WEIGHT_SCALE}"]}
    return {"match": f"^{pattern(module)}\\.qscale_weight$", "replace": f"{template(target, numbers)}.weight_scale",
            "inverse": [f"^{pattern(target)}\\.weight_scale$", f"{template(module, target_numbers)}.qscale_weight"]}


def weight_of(scale: str) -> str:
    return scale.removesuffix("_scale_inv").removesuffix("_scale")


def module_pattern(module: str) -> str:
    """'layers.0.self_attn.q_proj' -> '^layers\\.\\d+\\.self_attn\\.q_proj$': every layer's same module."""
    return "^" + r"\.".join(r"\d+" if part.isdigit() else re.escape(part) for part in module.split(".")) + "$"


def scale_kind(infos: Mapping[str, TensorInfo], scale: str) -> tuple[str, str]:
    """(scheme, stored name) that weight scale ``scale`` shows, by its name and its shape beside its weight's:
    ``weight_scale_inv`` is a block scale; ``weight_scale`` per tensor when it holds one value (0-d or [1]), per
    channel when [out, 1] (or [n, 1] with no weight listed), else, 2-D, a block scale as compressed-tensors' block
    strategy stores it ([ceil(out/b0), ceil(in/b1)], llm-compressor's FP8_BLOCK)."""
    shape, stored = infos[scale].shape, scale.rpartition(".")[2]
    weight = infos.get(weight_of(scale))
    if stored == "weight_scale_inv":
        return "block", stored
    if len(shape) <= 1 and math.prod(shape) == 1:
        return "tensor", stored
    if len(shape) == 2 and shape[1] == 1 and (weight is None or shape[0] == weight.shape[0]):
        return "channel", stored
    return ("block" if len(shape) == 2 else "channel"), stored


def kind_name(scheme: str, stored: str) -> str:
    """'block', or 'block (weight_scale)' where a scheme's scales are stored under another name than its default."""
    return scheme if stored == scale_name(scheme) else f"{scheme} ({stored})"


def config_block(config: Mapping[str, Any], stored: str) -> tuple[Any, str]:
    """The block size a draft's config states for block scales stored as ``stored`` (not checked), and where:
    FineGrainedFP8's ``weight_block_size`` for ``weight_scale_inv``; for ``weight_scale`` the ``block_structure``
    compressed-tensors' config groups of block strategy state (None unless they all state one)."""
    qc = config.get("quantization_config")
    qc = qc if isinstance(qc, Mapping) else {}
    if stored == "weight_scale_inv":
        return qc.get("weight_block_size"), "weight_block_size"
    said = [g["weights"].get("block_structure") for g in _block_groups(config)]
    return (said[0] if said and all(b == said[0] for b in said) else None), "block_structure"


def fp8_scheme(infos: dict[str, TensorInfo], config: Mapping[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The FP8 quant settings the stored scales show (:func:`scale_kind`; block: its block size the one the config
    states (:func:`config_block`) or else read from the scale and weight shapes, and ``block_scale: weight_scale``
    where the block scales are stored so; tensor: one ``weight_scale`` value; channel: one per output row), or None
    when they show none or several."""
    shown, fits = set(), [(1, math.inf), (1, math.inf)]   # per axis: the block sizes every scale's shape allows
    for name, info in infos.items():
        if not name.endswith(SCALES):
            continue
        shown.add(kind := scale_kind(infos, name))
        weight = infos.get(weight_of(name))
        if kind[0] == "block" and weight is not None and len(weight.shape) == len(info.shape) == 2:
            fits = [_both(fit, _blocks(n, c)) for fit, n, c in zip(fits, weight.shape, info.shape)]
    if len(shown) != 1:
        return None
    ((scheme, stored),) = shown
    if scheme != "block":
        return {"scheme": scheme}, f"quant.scheme: {scheme} (the stored scales: {stored})"
    named = {} if stored == scale_name("block") else {"block_scale": stored}   # FP8Params' default unsaid
    also = f"; block_scale: {stored} (the name the block scales are stored under)" if named else ""
    said, key = config_block(config, stored)
    if isinstance(said, list) and len(said) == 2 and all(isinstance(b, int) and lo <= b <= hi
                                                          for b, (lo, hi) in zip(said, fits)):
        note = f"quant: block {said[0]}x{said[1]} (the config's {key})"
        return {"scheme": scheme, "block": said, **named}, note + also
    if any(lo > hi for lo, hi in fits):
        note = f"quant.scheme: block ({stored}; no block size fits every scale's shape)"
        return {"scheme": scheme, **named}, note + also
    block = [_likeliest(lo, hi) for lo, hi in fits]
    open_ = [f"{lo}..{'' if hi == math.inf else int(hi)}" for (lo, hi), b in zip(fits, block) if lo != hi and b != 128]
    guess = f"; a guess: the shapes allow block sizes {' x '.join(open_)}" if open_ else ""
    note = f"quant: block {block[0]}x{block[1]} ({stored} and its shapes{guess})"
    return {"scheme": scheme, "block": block, **named}, note + also


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
