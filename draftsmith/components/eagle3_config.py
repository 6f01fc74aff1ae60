"""What an EAGLE-3 draft's config says about its fusion, resolved once: tap layers and the four norm flags.

Every value resolves explicit spec value > the draft config > a default, and every default taken for a field the
checkpoint does not state is reported (engines that defaulted silently lost all acceptance; FORMATS.md).

Tap ids: the spec's ``aux_layers.ids`` > ``eagle_config.eagle_aux_hidden_state_layer_ids`` > the same key at top
level (speculators) > a top-level ``target_layer_ids`` (Qwen3-style drafts) > the reference default
[2, L//2, L-3] of layer inputs. Count: explicit ``num_aux`` > ``num_aux_hidden_states`` (top level or under
``eagle_config``) > len(ids) > 3. Ids name layer inputs (``at: input``, HF ``hidden_states[id]``, vLLM) or layer
outputs (``at: output``, SGLang), always as the spec says.

Flags (``fc_norm``, ``norm_before_fc``, ``norm_before_residual``, ``norm_output``): a value the spec states wins;
``auto`` (or leaving the field out) reads the same key from the config's top level or
``eagle_config``. The config key ``norm_output`` has two published meanings, chosen by the config's style: in a
speculators config (``speculators_config`` / ``speculators_model_type`` present) true means the post-norm state is
fed back (EAGLE 3.1, vLLM / SGLang); elsewhere (SpecForge) it means the final norm is applied before the head
(default true there). Without it, NVIDIA Model-Optimizer's ``use_last_layernorm: false`` means none (true: a final
norm, as head and feed_back have); both stated and disagreeing is refused unless the spec states norm_output, and
so is a false one whose checkpoint holds the final norm's weight (:func:`held_norm_problem`).
Model-Optimizer's flags that ask for a draft the fusion does not compute are refused by name
(:func:`unbuilt_problems`).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from draftsmith import limits
from draftsmith.components.eagle3_keys import (LAST_NORM, nested, config_notes, config_value, unbuilt_problems,
                                               where)
from draftsmith.errors import Problem, SpecError, short
from draftsmith.values import is_int

KEY = "eagle_aux_hidden_state_layer_ids"
FLAGS = ("fc_norm", "norm_before_fc", "norm_before_residual")
FLAG_DEFAULTS = {"fc_norm": False, "norm_before_fc": False, "norm_before_residual": False}
SPECULATORS_KEYS = ("speculators_config", "speculators_model_type")
FINAL_NORM = "norm.weight"          # the final norm's canonical tensor (draft.norms.final)


@dataclass(frozen=True)
class Eagle3Facts:
    taps: tuple[int, ...]          # target layer INPUT indices 0..L, distinct
    fc_norm: bool
    norm_before_fc: bool
    norm_before_residual: bool
    norm_output: str               # none | head | feed_back
    notes: tuple[str, ...]         # every default taken and every disagreement with the config, one each


def default_taps(target_layers: int) -> list[int]:
    L = target_layers
    return [2, L // 2, L - 3]


def config_ids(cfg: Mapping[str, Any]) -> tuple[list[int] | None, str]:
    """(ids, where they came from) from a draft config, or (None, '') when it names none."""
    for key, value in ((f"eagle_config.{KEY}", nested(cfg).get(KEY)), (KEY, cfg.get(KEY)),
                       ("target_layer_ids", cfg.get("target_layer_ids"))):
        if value:
            return _layer_ids(value, key), f"the draft config's {key}"
    return None, ""


TAP_IDS = f"a list of at most {limits.TARGET_LAYERS + 1} integers (layer indices)"
AUX_COUNT = f"an integer in 1..{limits.TARGET_LAYERS + 1}"


def unread_ids(cfg: Mapping[str, Any]) -> str:
    """'; it has tap_layers: [1, 3, 6], which nothing reads: ...' for a draft config without tap ids that holds a
    list of integers under another key naming layers (its taps under another trainer's name), or ''."""
    found = [f"{where}{k}: {short(v)}" for where, c in (("", cfg), ("eagle_config.", nested(cfg))) for k, v in c.items()
             if k not in (KEY, "target_layer_ids") and "layer" in k.lower() and isinstance(v, list) and v
             and all(type(i) is int for i in v)]
    return (f"; it has {', '.join(found)}, which nothing reads: if these are its tap ids, state them as {KEY} or "
            "in the spec's draft.fusion.aux_layers.ids" if found else "")


def tap_ids_fault(value: Any) -> bool:
    """Whether a config's tap ids are no list of layer indices: 2.7 is not layer 2, "a" and [1] are not layers, and
    a list longer than any target's layer count is not a list of taps (the config reader refuses them naming the
    file, assembler.config; a fusion given such a config directly raises a SpecError)."""
    return not isinstance(value, list) or len(value) > limits.TARGET_LAYERS + 1 or not all(map(is_int, value))


def aux_count_fault(value: Any) -> bool:
    return value is not None and not (is_int(value) and 1 <= value <= limits.TARGET_LAYERS + 1)


def _layer_ids(value: Any, where: str) -> list[int]:
    if tap_ids_fault(value):
        raise SpecError("draft fusion", [Problem(f"draft config {where}", "not a list of layer indices", found=value,
                                                 allowed=TAP_IDS)])
    return list(value)


def repeated(ids: list[int]) -> list[int]:
    """The ids named more than once, sorted (one pass: a config may hold thousands)."""
    return sorted(i for i, n in Counter(ids).items() if n > 1)


def explicit_ids(params) -> list[int] | None:
    return list(params.aux_layers.ids) if params.aux_layers != "auto" and params.aux_layers.ids else None


def aux_count(params, draft_config: Mapping[str, Any]) -> int:
    explicit = params.num_aux or config_value(draft_config, "num_aux_hidden_states")
    if aux_count_fault(explicit):
        raise SpecError("draft fusion", [Problem("draft config num_aux_hidden_states", "not a count of aux states",
                                                 found=explicit, allowed=AUX_COUNT)])
    ids = explicit_ids(params) or config_ids(draft_config)[0]
    return explicit or (len(ids) if ids else 3)


def is_speculators_config(cfg: Mapping[str, Any]) -> bool:
    return any(k in cfg for k in SPECULATORS_KEYS)


def config_norm_output(cfg: Mapping[str, Any]) -> str | None:
    """The config's ``norm_output`` in spec terms, read in the meaning of the config's style, else a false
    ``use_last_layernorm`` (Model-Optimizer: no final norm at all, none; true says only that there is one, head or
    EAGLE 3.1's feed_back, which the spec's value or its default decides); None if it states neither."""
    value = config_value(cfg, "norm_output")
    if value is None:
        last = config_value(cfg, LAST_NORM)
        return None if last is None or last else "none"
    if is_speculators_config(cfg):
        return "feed_back" if value else "head"
    return "head" if value else "none"


def norm_output_key(cfg: Mapping[str, Any]) -> str:
    """The key :func:`config_norm_output` read, as the file nests it (``eagle_config.use_last_layernorm``)."""
    return where(cfg, "norm_output" if config_value(cfg, "norm_output") is not None else LAST_NORM)


def last_norm_clash(cfg: Mapping[str, Any]) -> Problem | None:
    """A config whose ``norm_output`` and ``use_last_layernorm`` disagree on whether a final norm exists."""
    last, said = config_value(cfg, LAST_NORM), config_norm_output(cfg)
    if last is None or config_value(cfg, "norm_output") is None or bool(last) == (said != "none"):
        return None
    return Problem(f"draft config {where(cfg, LAST_NORM)}",
                   f"says {str(bool(last)).lower()}, and the config's norm_output means {said} in its style: one "
                   "says the draft has a final norm, the other that it has none",
                   found=last, allowed="a value agreeing with norm_output",
                   hint="State draft.fusion.norm_output in the spec (none: no final norm; head: a norm before the "
                        "head only).")


def held_norm_problem(cfg: Mapping[str, Any], held: bool) -> Problem | None:
    """A false ``use_last_layernorm`` (norm_output none: no norm_output key beside it) whose checkpoint holds the final
    norm's weight (``held``): Model-Optimizer exports one only with a final norm; vLLM / SGLang apply it regardless."""
    if not held or config_value(cfg, "norm_output") is not None or config_norm_output(cfg) != "none":
        return None
    return Problem(f"draft config {where(cfg, LAST_NORM)}", "says false (no final norm: Model-Optimizer then builds "
                   f"none and exports no {FINAL_NORM}), but the checkpoint holds the final norm's {FINAL_NORM}, which "
                   "engines that do not read the key (vLLM, SGLang) apply before the head", found=False,
                   allowed=f"true for a draft trained with the final norm, or a checkpoint without {FINAL_NORM}",
                   hint=f"State draft.fusion.norm_output in the spec (none: the {FINAL_NORM} held is not applied; "
                        "head: it is applied before the head).")


def config_states(cfg: Mapping[str, Any], name: str) -> bool:
    """Whether the draft config states the fusion flag ``name`` (norm_output: under either of its keys)."""
    return config_value(cfg, name) is not None or (name == "norm_output" and config_norm_output(cfg) is not None)


def drafted_norm_output(norm_output: str | None, feed_back: str) -> str | None:
    """The fusion's ``norm_output`` as the draft runs it: ``draft.feed_back: post_norm`` beside a norm before the
    head (``head``) is ``feed_back``, its other spelling (a config states the two alike); anything else as it is."""
    return "feed_back" if feed_back == "post_norm" and norm_output == "head" else norm_output


def as_inputs(ids: list[int], at: str) -> list[int]:
    """Tap ids as the layer inputs they tap: an id read as a layer's output (``at: output``, SGLang) taps the next
    layer's input (HF hidden_states[id], vLLM)."""
    return [i + 1 if at == "output" else i for i in ids]


def resolve_taps(params, draft_config: Mapping[str, Any], target_layers: int,
                 notes: list[str] | None = None, deferred: list[Problem] | None = None) -> tuple[int, ...]:
    """Layer-INPUT indices (0..L) of the target, distinct, ascending (the order SGLang, vLLM and the EAGLE reference
    concatenate them in, whatever order a config lists them in); SpecError otherwise. ``deferred``: ids out of range
    or repeated (the right count: no tensor's shape depends on the values) are added to it instead, and stand-in
    taps of that count returned, so that the tensors are checked too and said with them."""
    at = "input" if params.aux_layers == "auto" else params.aux_layers.at
    stated = explicit_ids(params)
    ids, origin = (stated, "the spec") if stated else config_ids(draft_config)
    source = "spec" if stated else "draft"   # where the ids came from: DISTINCT_HINT's key
    path = "draft.fusion.aux_layers.ids" if stated else "draft.fusion.aux_layers"   # the ids' own line, a base's
    if ids is None:   # at: output has no ids to apply to (SGLang's output default names the same layers)
        unused = "; the spec's aux_layers.at: output has no ids to apply to" if at == "output" else ""
        ids, at, source = default_taps(target_layers), "input", "default"
        origin = f"the default [2, L//2, L-3] for a {target_layers}-layer target"
        if notes is not None:
            notes.append(f"aux layers: the draft config names no {KEY} / target_layer_ids, so the taps are {origin}: "
                         f"{ids} (layer inputs){unused}{unread_ids(draft_config)}")
    count = aux_count(params, draft_config)
    taps = as_inputs(ids, at)
    problems = []
    if len(taps) != count:
        asker = ("the spec's num_aux" if params.num_aux else "the draft config's num_aux_hidden_states"
                 if config_value(draft_config, "num_aux_hidden_states") is not None else "the default")
        problems.append(Problem("draft.fusion.num_aux", f"{count} aux states asked for by {asker} but {origin} "
                                                        f"gives {short(ids)}",
                                hint="" if params.num_aux else "A num_aux in the spec overrides the config's count."))
    bad = [i for i, t in zip(ids, taps) if not 0 <= t <= target_layers]   # said as written, not as inputs
    if bad:
        allowed = (f"-1..{target_layers - 1} (layer outputs; -1: the embedding's)" if at == "output" else
                   f"0..{target_layers} (layer inputs; {target_layers}: the last layer's output)")
        problems.append(Problem(path, f"tap layers {short(bad)} (from {origin}, at {at}) are outside the target's "
                                      f"{target_layers} layers", allowed=allowed))
    if dup := repeated(taps):
        problems.append(Problem(path, f"{short(ids)} (from {origin}, at {at}) names layer(s) {short(dup)} more "
                                      "than once; taps must be distinct",
                                hint=DISTINCT_HINT[source]))
    if problems and deferred is not None and len(taps) == count <= target_layers + 1:
        deferred += problems
        return tuple(range(count))
    if problems:
        raise SpecError("draft fusion", problems)
    return tuple(sorted(taps))


# how to mend repeated taps, by where the ids came from
DISTINCT_HINT = {"spec": "Give distinct aux_layers.ids.",
                 "draft": "Give distinct aux_layers.ids in the spec (is the draft made for a target of this depth?).",
                 "default": "Give aux_layers.ids explicitly, or use a target with more layers (the default needs at "
                            "least 7)."}


def _flag(params, name: str, cfg: Mapping[str, Any], notes: list[str]) -> bool:
    stated, found = getattr(params, name), config_value(cfg, name)
    if stated is not None and name in params.model_fields_set:
        if found is not None and bool(found) != stated:
            notes.append(f"{name}: the spec says {str(stated).lower()}, the draft config {str(found).lower()}; "
                         "using the spec's")
        return bool(stated)
    if found is None:
        notes.append(f"{name}: stated by neither the spec nor the draft config; using the default "
                     f"{str(FLAG_DEFAULTS[name]).lower()}")
        return FLAG_DEFAULTS[name]
    return bool(found)


def _norm_output(params, cfg: Mapping[str, Any], notes: list[str]) -> str:
    found = config_norm_output(cfg)
    if params.norm_output is not None and "norm_output" in params.model_fields_set:
        if found is not None and found != params.norm_output:
            key = norm_output_key(cfg)
            notes.append(f"norm_output: the spec says {params.norm_output}, the draft config's {key}="
                         f"{str(config_value(cfg, key.rsplit('.', 1)[-1])).lower()} means {found} in its style; "
                         "using the spec's")
        return params.norm_output
    if clash := last_norm_clash(cfg):
        raise SpecError("draft fusion", [clash])
    if found is None:
        notes.append("norm_output: stated by neither the spec nor the draft config; using the default head (final "
                     "norm before the head only, the pre-norm state fed back)")
        return "head"
    if found == "head" and not is_speculators_config(cfg) and config_value(cfg, "fc_norm"):
        notes.append("norm_output: true in a non-speculators config is read in SpecForge's meaning (norm before the "
                     "head); an EAGLE 3.1 draft trained for SGLang means feed_back: state it in the spec")
    return found


def _flags(params, cfg: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    flags: dict[str, Any] = {name: _flag(params, name, cfg, notes) for name in FLAGS}
    flags["norm_output"] = _norm_output(params, cfg, notes)
    if flags["fc_norm"] and flags["norm_before_fc"]:
        why = "fc_norm and norm_before_fc are exclusive (one norm per aux state, or one over their concatenation)"
        raise SpecError("draft fusion", [Problem("draft.fusion", why)])
    return flags


def read_flags(params, draft_config: Mapping[str, Any]) -> dict[str, Any]:
    """The four flags as :func:`resolve_eagle3` resolves them for this draft config (``Component.reads``)."""
    return _flags(params, draft_config, [])


def resolve_eagle3(params, draft_config: Mapping[str, Any], target_layers: int,
                   deferred: list[Problem] | None = None) -> Eagle3Facts:
    """The fusion's facts (taps, flags, notes); a draft config the fusion cannot run (:func:`unbuilt_problems`) is
    refused, with ``deferred``'s problems where given (said beside the tensors')."""
    notes: list[str] = []
    taps = resolve_taps(params, draft_config, target_layers, notes, deferred)
    if unbuilt := unbuilt_problems(draft_config):
        if deferred is None:
            raise SpecError("draft fusion", unbuilt)
        deferred += unbuilt
    notes += config_notes(draft_config)
    return Eagle3Facts(taps, **_flags(params, draft_config, notes), notes=tuple(notes))


def describe_facts(params, draft_config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(resolved values for a spec, one line per fact) without a target: what ``inspect`` prints. The aux ids
    are given as the spec would state them (``{ids, at}``; ids None when the default of the target applies)."""
    notes: list[str] = []
    flags = _flags(params, draft_config, notes)
    said = {n.split(":")[0] for n in notes}

    def source(name: str) -> str:
        stated = name in params.model_fields_set and getattr(params, name) is not None
        return ("the spec" if stated else "the draft config") + \
            ("; the weights cannot show it" if name == "norm_before_residual" else "")

    lines = [f"{name}: {str(value).lower()} ({source(name)})" for name, value in flags.items() if name not in said]
    at = "input" if params.aux_layers == "auto" else params.aux_layers.at
    ids, origin = (explicit_ids(params), "the spec") if explicit_ids(params) else config_ids(draft_config)
    if ids is None:
        lines.append(f"aux layers: the draft config names no {KEY} / target_layer_ids; the default "
                     f"[2, L//2, L-3] (layer inputs) of the target applies{unread_ids(draft_config)}")
    else:
        lines.append(f"aux layers: {ids} from {origin}, read as layer {at}s (vLLM / HF hidden_states[id]; SGLang "
                     "reads ids as layer outputs: use at: output for a draft trained that way)")
    return {**flags, "aux_layers": {"ids": ids, "at": at}}, lines + notes + config_notes(draft_config)
