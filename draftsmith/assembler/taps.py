"""EAGLE-3 tap layers: which target layer inputs feed the draft.

Count: explicit ``num_aux`` > len(ids) > 3. Ids: the spec's ``aux_layers.ids`` > the draft config's
``eagle_config.eagle_aux_hidden_state_layer_ids`` (or the same key at top level, speculators) > the reference
default [2, L//2, L-3] (layer inputs). ``at: output`` ids name a layer's output, i.e. the input of id + 1.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from draftsmith.specs.errors import Problem, SpecError

KEY = "eagle_aux_hidden_state_layer_ids"


def default_taps(target_layers: int) -> list[int]:
    L = target_layers
    return [2, L // 2, L - 3]


def config_ids(draft_config: Mapping[str, Any]) -> list[int] | None:
    ids = (draft_config.get("eagle_config") or {}).get(KEY, draft_config.get(KEY))
    return list(ids) if ids else None


def aux_count(params, draft_config: Mapping[str, Any]) -> int:
    explicit = params.num_aux or draft_config.get("num_aux_hidden_states")
    ids = _explicit_ids(params) or config_ids(draft_config)
    return explicit or (len(ids) if ids else 3)


def _explicit_ids(params) -> list[int] | None:
    return list(params.aux_layers.ids) if params.aux_layers != "auto" and params.aux_layers.ids else None


def resolve_taps(params, draft_config: Mapping[str, Any], target_layers: int) -> tuple[int, ...]:
    """Layer-INPUT indices (0..L) of the target, distinct, in order; SpecError otherwise."""
    at = "input" if params.aux_layers == "auto" else params.aux_layers.at
    ids = _explicit_ids(params) or config_ids(draft_config)
    path = "draft.fusion.aux_layers"
    if ids is None:
        ids, at = default_taps(target_layers), "input"
        origin = f"the default [2, L//2, L-3] for a {target_layers}-layer target"
    else:
        origin = "the spec" if _explicit_ids(params) else f"the draft config's {KEY}"
    count = aux_count(params, draft_config)
    taps = [i + 1 if at == "output" else i for i in ids]
    problems = []
    if len(taps) != count:
        problems.append(Problem("draft.fusion.num_aux", f"{count} aux states asked for but {origin} gives {ids}"))
    bad = [i for i in taps if not 0 <= i <= target_layers]
    if bad:
        problems.append(Problem(path, f"tap layers {bad} (from {origin}, at {at}) are outside the target's "
                                      f"{target_layers} layers", allowed=f"0..{target_layers}"))
    if len(set(taps)) != len(taps):
        dup = sorted({i for i in taps if taps.count(i) > 1})
        problems.append(Problem(path, f"{ids} (from {origin}, at {at}) names layer(s) {dup} more than once; "
                                      "taps must be distinct",
                                hint="Give aux_layers.ids explicitly, or use a target with more layers "
                                     "(the default needs at least 7)."))
    if problems:
        raise SpecError("draft fusion", problems)
    return tuple(taps)
