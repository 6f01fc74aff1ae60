"""How close a checkpoint fits each built-in family (for one that fits no detector row): each family's spec rules
map the tensor names to canonical names, which count when that family's draft holds them (its components say which,
``Component.holds``; a fused qkv_proj / gate_up_proj whose parts it holds fits too: a split rule reads it, as
`inspect` proposes, see :data:`STACKED`), and how far the family's best detector row's conditions hold counts
alike. The names that fit none of them are listed; those a family's rules merely ignore do not count as fitting.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from draftsmith.assembler.detect import FAMILIES, condition_share
from draftsmith.assembler.splits import FUSED_MODULES
from draftsmith.hooks.records import HIDDEN_NORM as HIDDEN_NORM_SLOT
from draftsmith.errors import DraftsmithError
from draftsmith.hooks.kinds import KINDS


def unfit_names(spec_name: str, config: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """The tensor names a family's rules do not turn into a canonical draft name (those it ignores are not listed
    here: :func:`closest_families` does not count them as fitting either)."""
    found = _placed(spec_name, config, names)
    return list(names) if found is None else [n for n in names if found[n] is False]


def _placed(spec_name: str, config: Mapping[str, Any], names: Sequence[str]) -> dict[str, bool | None] | None:
    """name -> True (the family's rules turn it into a canonical name its draft holds, or into a fused module whose
    parts it holds: :func:`split_parts`), False (they do not), None (they ignore it); None when the spec's rules
    cannot be bound to this config."""
    from draftsmith.assembler.build import rule_set
    from draftsmith.assembler.config import flatten_draft_config
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec

    try:
        spec, registry = load_spec(spec_name), default_registry()
        rules = rule_set(spec, registry, flatten_draft_config(config))
        holds = holder(spec, registry)
        out: dict[str, bool | None] = {}
        for n in names:
            canonical = rules.to_canonical(n)[0]
            out[n] = None if canonical is None else holds(canonical) or split_parts(canonical, holds) is not None
    except DraftsmithError:  # placeholders this config cannot bind, a plugin's rule or holds that fails: fits nothing
        return None
    return out


def holder(spec, registry) -> Callable[[str], bool]:
    """holds(canonical): whether ``canonical`` is a canonical draft name that ``spec``'s draft holds."""
    held = [re.compile(p) for p in held_patterns(spec, registry)]
    return lambda c: any(p.match(c) for p in held)


# Fused modules whose rows are their parts stacked in this order (Phi-3's qkv_proj, q | k | v, and gate_up_proj,
# gate | up, as some EAGLE exports store them), with the parts splits.FUSED_MODULES names for each, in its order.
# Other fused names there are not read by a split rule in part order (GPT-NeoX's query_key_value interleaves
# heads), so a checkpoint holding one gets no proposal.
STACKED: dict[str, tuple[str, ...]] = {
    fused: tuple(part for part, names in FUSED_MODULES.items() if fused in names)
    for fused in ("qkv_proj", "gate_up_proj")}


def split_parts(canonical: str, holds: Callable[[str], bool]) -> tuple[str, ...] | None:
    """The canonical names a fused tensor holds, rows stacked in this order ('layers.0.self_attn.qkv_proj.weight'
    -> its q_proj, k_proj, v_proj weights), when ``canonical`` names a module of :data:`STACKED` and ``holds``
    (see :func:`holder`) every part; else None."""
    module, _, leaf = canonical.rpartition(".")
    head, _, fused = module.rpartition(".")
    if fused not in STACKED or not head:
        return None
    parts = tuple(f"{head}.{part}.{leaf}" for part in STACKED[fused])
    return parts if all(holds(p) for p in parts) else None


LINEAR_SCALES = r"(weight_scale|weight_scale_inv|input_scale)"


def held_patterns(spec, registry) -> list[str]:
    """Regexes of the canonical names a spec's draft can hold, read from the spec's sections: what its fusion and
    attention components say they hold (``Component.holds``; "auto" attention holds what any of its choices
    does), which layers have an input norm, whether the first has a hidden norm, a final norm, an own head and
    vocabulary map, an own embedding, and FP8 scales beside any linear (inspect proposes the quantization the
    scales show)."""
    d = spec.draft
    out = [r"^layers\.\d+\.post_attention_layernorm\.weight$",
           r"^layers\.\d+\.mlp\.(gate|up|down)_proj\.(weight|bias)$",
           rf"^(fc|layers\.\d+\.(self_attn|mlp)\.\w+_proj(_with_mqa)?)\.{LINEAR_SCALES}$"]
    if d.moe == "as_target":   # the target type's mixture of experts (components.moe: router, experts, shared)
        out.append(r"^layers\.\d+\.mlp\.(gate\.(weight|e_score_correction_bias)|(experts\.\d+|shared_experts)\."
                   rf"(gate|up|down)_proj\.(weight|{LINEAR_SCALES}))$")
    fusion = registry.holds("fusion", d.fusion.kind, d.fusion.params, (r"^fc\.", HIDDEN_NORM_SLOT))
    out += [p for p in fusion if p != HIDDEN_NORM_SLOT]
    if d.norms.hidden is not False and HIDDEN_NORM_SLOT in fusion:   # true of a fusion without it: refused at load
        out.append(HIDDEN_NORM_SLOT)
    reserved = KINDS["attention"].reserved.get(d.attention.kind)
    for kind in reserved.choices if reserved else (d.attention.kind,):
        out += registry.holds("attention", kind, d.attention.params, (r"^layers\.\d+\.self_attn\.",))
    if d.norms.input == "all":
        out.append(r"^layers\.\d+\.input_layernorm\.weight$")
    elif d.norms.input == "not_first":
        out.append(r"^layers\.(?!0\.)\d+\.input_layernorm\.weight$")
    if d.norms.final:
        out.append(r"^norm\.weight$")
    if d.share.lm_head == "draft":
        out.append(r"^lm_head\.weight$")
        if d.vocab.reduced is not False:
            out.append(r"^(d2t|t2d)$")
    if d.share.embed != "target":
        out.append(r"^embed_tokens\.weight$")
    return out


def closest_families(config: Mapping[str, Any], names: Sequence[str], n: int = 2) -> list[tuple[str, float, list[str]]]:
    """[(spec, score, the names that did not fit)] for the n closest families, best first. score = (share of the
    names the family's rules place onto canonical names its draft holds + how far its best row's conditions hold,
    see :func:`condition_share`) / 2; a name its rules ignore does not fit (a whole target's tensors are all
    ignored by deepseek-mtp, which holds none of them). A spec an installed plugin or a DRAFTSMITH_SPEC_PATH folder
    registers is scored too, by the share its rules and its components' ``holds`` place alone (it has no detection
    row to weigh: a spec placing every name was "50% fit"), so a plugin family's layout its detector declined is
    still offered. A family that scores 0 (none of the names placed, none of its row's conditions holding) is no
    offer: none at all where no family comes closer."""
    from draftsmith.registry import default_registry
    from draftsmith.registry.loading import BUILTIN

    scored, seen = {}, {}
    rows = {spec: max(condition_share(f, config, names, seen) for f in FAMILIES if f.spec == spec)
            for spec in dict.fromkeys(f.spec for f in FAMILIES)}   # each family's best row, once per family
    others = {name: 0.0 for name, given in default_registry().specs.items() if given.plugin != BUILTIN}
    for spec, conditions in {**rows, **others}.items():   # rows first: they win a tie
        placed = _placed(spec, config, names)
        bad = list(names) if placed is None else [x for x in names if not placed[x]]   # placing none: scores 0
        share = (len(names) - len(bad)) / max(len(names), 1)
        scored[spec] = (share if spec in others else (share + conditions) / 2), bad
    best = sorted(scored.items(), key=lambda kv: -kv[1][0])
    return [(spec, score, bad) for spec, (score, bad) in best if score > 0][:n]   # 0: places nothing, holds nothing
