"""The last check of a conversion: the written draft against the model the spec `inspect` proposes for it.

`verify` (draftsmith.convert.run) compares what a folder reads back as through the rules; this asks the model
itself, as `assemble()` would, which tensors it misses or does not expect (a tensor carried under a name the
target layout's spec refuses was once written and only found at load time). There is no target at conversion
time, so a stand-in implied by the draft's own config takes its place: its sizes are guesses, so only names are
judged (missing, unexpected, colliding), never shapes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from transformers import LlamaConfig

from draftsmith.errors import DraftsmithError

NAME_PROBLEMS = ("missing:", "unexpected:", "collision:")
STAND_IN_LAYERS = 64   # enough layers for the usual taps; a draft tapping deeper gets as many as it taps


def stand_in_target(raw: Mapping[str, Any], draft_cfg) -> LlamaConfig:
    """A target config the draft's config implies: its vocabulary, the width it reads and layers for its taps."""
    ids = (raw.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or \
        raw.get("eagle_aux_hidden_state_layer_ids") or []
    deepest = max((i for i in ids if isinstance(i, int)), default=0)
    hidden = raw.get("target_hidden_size") or draft_cfg.hidden_size
    extra = {"hc_mult": raw["hc_mult"]} if isinstance(raw.get("hc_mult"), int) else {}
    return LlamaConfig(vocab_size=int(raw.get("vocab_size") or draft_cfg.vocab_size), hidden_size=int(hidden),
                       num_hidden_layers=max(STAND_IN_LAYERS, deepest + 1), num_attention_heads=1,
                       num_key_value_heads=1, intermediate_size=1, **extra)


def name_misfits(folder: Path, spec_data: Mapping[str, Any], registry=None) -> list[str]:
    """The name problems the spec's load plan finds in ``folder`` (``[]`` when it fits, or when no stand-in target
    can be built for it: then verify's own comparison is the only check)."""
    from draftsmith.assembler.build import build_draft, rule_set
    from draftsmith.assembler.checkpoint import list_tensors
    from draftsmith.assembler.config import draft_hf_config, flatten_draft_config, read_config
    from draftsmith.assembler.load import plan_module
    from draftsmith.assembler.plan import CheckpointMismatch
    from draftsmith.components.backends import eager
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import parse_spec

    registry = registry or default_registry()
    spec = parse_spec(dict(spec_data), source=f"the spec inspect proposes for {folder}", registry=registry)
    raw, infos = read_config(folder), list_tensors(folder)
    rules = rule_set(spec, registry, flatten_draft_config(raw))
    canonical = [c for c in (rules.to_canonical(n)[0] for n in infos) if c is not None]
    draft_cfg = draft_hf_config(raw, folder / "config.json")   # read as assemble() reads it: its errors are real
    try:
        stand_in = stand_in_target(flatten_draft_config(raw), draft_cfg)
    except Exception:  # noqa: BLE001 (transformers' own config checks): no stand-in, nothing judged
        return []
    try:
        model = build_draft(spec, registry, draft_raw=raw, draft_cfg=draft_cfg, target_cfg=stand_in,
                            canonical_names=canonical, backend=eager)
    except (DraftsmithError, ValueError, TypeError):   # the stand-in's guess did not fit: nothing judged
        return []
    try:
        plan_module(model, folder, rules, spec=spec.name, infos=infos)
    except CheckpointMismatch as e:
        return [p for p in e.problems if p.startswith(NAME_PROBLEMS)]
    return []
