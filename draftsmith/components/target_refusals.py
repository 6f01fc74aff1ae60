"""Refusals of target configs: the error a target's config raises where draftsmith would compute something other
than transformers' model of its type (the reason, the file, the allowed values, the fix), and the checks
:meth:`draftsmith.components.targets.TargetArch.check` runs (mixture-of-experts settings, layer kinds, partial
rotation, multimodal rope)."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from draftsmith.components.params import MoEParams
from draftsmith.errors import DraftsmithError, short, short_text


class UnsupportedTarget(DraftsmithError, ValueError):
    """A registered model_type whose config asks for something draftsmith does not implement."""


def config_path(cfg) -> str:
    """The file a target's refusal names: the config.json of the folder transformers read ``cfg`` from (its
    ``name_or_path``), else 'config.json' (a config made in memory)."""
    folder = getattr(cfg, "name_or_path", None)
    return short_text(Path(folder) / "config.json", 300) if isinstance(folder, str) and folder else "config.json"


def refused(cfg, message: str) -> UnsupportedTarget:
    """``message`` about a target's config, naming its file and type: '<folder>/config.json: llama target: ...'."""
    return UnsupportedTarget(f"{config_path(cfg)}: {getattr(cfg, 'model_type', None)} target: {message}")


# the fix a refusal gives: a value the checkpoint's weights were trained under (another would load them under another
# router), and a count or rule that does not describe them (its own value does)
UNCOMPUTED = ("Fix: use a target whose config.json has an allowed value (editing this one would load its weights under "
              "another computation, whose logits are not the checkpoint's)")
SET_FIX = "Fix: set it in config.json to the checkpoint's own value (the one its weights were saved with)"
# the largest routed_scaling_factor taken: float32's (the router's dtype) largest; past it the factor is inf there
SCALING_MAX = 3.4028234663852886e38
LAYERS_FIX = "Fix: set it in config.json to what the checkpoint holds (its layers whose weights are mlp.experts.*)"


def moe_refusal(cfg, key: str, found: Any, allowed: str, fix: str = SET_FIX) -> UnsupportedTarget:
    """The refusal of a mixture-of-experts setting ``key`` of ``cfg`` a moe component does not compute."""
    return refused(cfg, f"{key}={found!r} in its mixture-of-experts layers, which draftsmith does not compute; "
                        f"allowed: {allowed}. {fix}")


def moe_sizes(cfg, keys: Sequence[str]) -> list[int]:
    """The config's values of ``keys`` (its experts' count, top-k, width keys), each a positive int, else refused."""
    for key in keys:
        if not isinstance(value := getattr(cfg, key, None), int) or isinstance(value, bool) or value < 1:
            raise moe_refusal(cfg, key, value, "a positive int")
    return [getattr(cfg, key) for key in keys]


def moe_check(cfg, arch: Any) -> None:
    """Refuse a mixture-of-experts setting the ``moe: sparse`` component does not compute exactly (with the reason);
    another ``moe_kind``'s component reads (and checks) its own settings."""
    def refuse(key: str, found: Any, allowed: str, fix: str = SET_FIX) -> UnsupportedTarget:
        return moe_refusal(cfg, key, found, allowed, fix)

    if getattr(arch, "moe_kind", "sparse") != "sparse":
        return
    for key, allowed in arch.moe_options:
        if (found := getattr(cfg, key, None)) is not None and found not in allowed:
            raise refuse(key, found, ", ".join(map(repr, allowed)) + " (or the key absent)", UNCOMPUTED)
    params = MoEParams(**dict(arch.moe))   # as TargetArch.moe_params (a plugin's record may lack it)
    if getattr(cfg, "hidden_act", "silu") != "silu":
        raise refuse("hidden_act", cfg.hidden_act, "'silu' (the experts are SwiGLU MLPs)", UNCOMPUTED)
    keys = [params.experts_key, params.top_k_key, params.intermediate_key]
    experts, top_k, _ = moe_sizes(cfg, keys)
    if params.grouped:
        groups, topk_group = getattr(cfg, "n_group", None), getattr(cfg, "topk_group", None)
        if type(groups) is not int or groups < 1 or experts % groups or experts // groups < 2:   # bool: no count
            raise refuse("n_group", groups, f"a divisor of {keys[0]}={experts} leaving at least 2 experts a group "
                                            "(a group is scored by its top two)")
        if type(topk_group) is not int or not 1 <= topk_group <= groups:
            raise refuse("topk_group", topk_group, f"1..n_group={groups}")
        experts = topk_group * (experts // groups)
    if top_k > experts:
        raise refuse(keys[1], top_k, f"1..{experts} (the experts a token may choose from)")
    shared = getattr(cfg, params.shared_key, None) if params.shared_key else None
    if shared is not None and (type(shared) is not int or shared < 0):   # a negative width failed inside torch
        raise refuse(params.shared_key, shared, "a count of shared experts, 0 or more (an int)")
    scaling = getattr(cfg, params.scaling_key, None) if params.scaling_key else None
    if scaling is not None and (not isinstance(scaling, (int, float)) or isinstance(scaling, bool)
                                or not math.isfinite(scaling) or abs(scaling) > SCALING_MAX):
        raise refuse(params.scaling_key, scaling, "a finite number (float32's: it scales the routed experts' sum, "
                                                  "where NaN or inf makes every logit NaN)")


MLP_KINDS = ("dense", "sparse")


def moe_types(cfg, key: str) -> list[str]:
    """The config's per-layer MLP kinds ``key`` (GLM-4.7-Flash's mlp_layer_types: "sparse" the MoE layers), one for
    each layer, else refused with what is allowed; where the config also states first_k_dense_replace (DeepSeek's
    rule, which vLLM reads and transformers does not) the two must agree, or which layers are MoE is ambiguous."""
    types, layers = getattr(cfg, key, None), cfg.num_hidden_layers
    if not isinstance(types, (list, tuple)) or len(types) != layers or any(t not in MLP_KINDS for t in types):
        raise refused(cfg, f"{key}={short(types, 120)} does not say which layers are mixture-of-experts; allowed: a "
                      f"list of {layers} entries (num_hidden_layers), each 'dense' or 'sparse'. {LAYERS_FIX}")
    first = getattr(cfg, "first_k_dense_replace", None)
    if type(first) is int and list(types) != ["dense"] * min(first, layers) + ["sparse"] * (layers - first):
        raise refused(cfg, f"first_k_dense_replace={first} and {key} name different MoE layers (transformers reads "
                      f"{key}, vLLM first_k_dense_replace); allowed: first_k_dense_replace absent, or {key} 'dense' "
                      f"for exactly its first {first} layers. {LAYERS_FIX}")
    return list(types)


# the layer kinds a type that reads layer_types computes (its window rule): every other kind transformers names
# (chunked_attention, linear_attention, ...) is another computation, which the gqa attention would run as full
WINDOW_KINDS = ("full_attention", "sliding_attention")


def layer_types_check(cfg) -> None:
    """Refuse ``layer_types`` entries other than full and sliding attention for a type whose layers read them:
    draftsmith would attend such a layer in full, where transformers' model of the type fails or computes another
    attention."""
    types = getattr(cfg, "layer_types", None) or ()
    other = [(i, kind) for i, kind in enumerate(types) if kind not in WINDOW_KINDS]
    if other:
        found = ", ".join(f"{kind!r} (layer {i})" for i, kind in other[:3]) + (" ..." if len(other) > 3 else "")
        raise refused(cfg, f"layer_types holds {found}, a layer kind draftsmith does not compute (its layers attend "
                      f"in full or within sliding_window); allowed: {', '.join(WINDOW_KINDS)}. {UNCOMPUTED}")
    sliding = [i for i, kind in enumerate(types) if kind == "sliding_attention"]
    if not sliding:
        return
    if getattr(cfg, "sliding_window", None) is None:
        raise refused(cfg, f"layer_types marks layer {sliding[0]} sliding_attention, but sliding_window is null: "
                      "transformers' model of the type fails building that layer's mask (draftsmith would attend in "
                      "full); allowed: a sliding_window, or no sliding_attention layer. " + SET_FIX)
    if getattr(cfg, "use_sliding_window", None) is False:
        raise refused(cfg, f"layer_types marks layer {sliding[0]} sliding_attention while use_sliding_window is "
                      "false: transformers' sdpa and eager attention window that layer (its mask), its flash "
                      "attention does not (the attention's window is use_sliding_window's), so the config states no "
                      "one computation; allowed: use_sliding_window true, or no sliding_attention layer. " + SET_FIX)


def rope_layers_check(cfg, key: str) -> None:
    """Refuse a per-layer rotation list (a GQA attention's rope_layers_key: SmolLM3's no_rope_layers) that does not
    say for each layer whether it rotates (:func:`draftsmith.components.rope.rope_layers_problem`): transformers'
    model of the type fails indexing a short one."""
    from draftsmith.components.rope import rope_layers_problem

    if (why := rope_layers_problem(cfg, key, cfg.num_hidden_layers)) is not None:
        raise refused(cfg, f"{why}. {SET_FIX}")


def rotary_check(cfg) -> None:
    """Refuse a partial_rotary_factor that leaves no whole pair of each head's channels rotated, or is no fraction
    (transformers' model of such a type computes garbage or fails at its first forward)."""
    from draftsmith.components.dims import Dims
    from draftsmith.components.rope import rotary_dim

    try:
        rotary_dim(cfg, Dims.from_config(cfg).head_dim, partial=True)
    except ValueError as e:
        raise refused(cfg, f"{e} (rope_parameters, or the top level). {UNCOMPUTED}") from None


def mrope_covers(section: Any, half: int) -> bool:
    """Whether an ``mrope_section`` gives each of a head's ``half`` rotary frequencies to exactly one of the three
    position streams (three non-negative ints summing to it): then text (equal streams) rotates as 1-D rope."""
    return isinstance(section, (list, tuple)) and len(section) == 3 and all(
        type(n) is int and n >= 0 for n in section) and sum(section) == half


def mrope_check(cfg, default: tuple[int, ...]) -> None:
    """Refuse a multimodal rope whose text-only rotation is not 1-D rope. transformers' model turns each of the
    head_dim / 2 rotary frequencies by one of three position streams (temporal, height, width: consecutive sections
    for Qwen2-VL, interleaved for Qwen3-VL); for text the three are equal, so this is 1-D rope with the same theta
    when the ``mrope_section`` (``default`` where the config has none) gives the streams every frequency once."""
    from draftsmith.components.dims import Dims

    params = getattr(cfg, "rope_parameters", None)
    section = params.get("mrope_section", list(default)) if isinstance(params, Mapping) else list(default)
    half = Dims.from_config(cfg).head_dim // 2
    if mrope_covers(section, half):
        return
    raise refused(cfg, f"mrope_section={section!r} (rope_parameters / rope_scaling) does not assign each of a head's "
                  f"{half} rotary frequencies to exactly one of the three position streams (temporal, height, width), "
                  "so its rotation of text is not the 1-D rope draftsmith computes; allowed: three non-negative ints "
                  f"summing to head_dim / 2 = {half}. {SET_FIX}")


def text_type_check(cfg, text_type: str) -> None:
    """Refuse a multimodal type's text model of another transformers type than ``text_type``, the one its record
    computes: transformers' model of the type builds its text_config's type (Kimi-K2.5's: any AutoConfig type), so
    draftsmith's layers would compute another model than the checkpoint's. ``cfg``: the text model's config
    (:func:`draftsmith.assembler.config.text_model_config`), whose class is its text_config's type."""
    found = getattr(type(cfg), "model_type", None)
    if found != text_type:
        raise refused(cfg, f"text_config.model_type is {found!r}: transformers builds its text model as that "
                      f"type's, not the {text_type} model draftsmith computes for this type; allowed: {text_type} "
                      f"(or a type transformers reads as {text_type}, such as Kimi-K2.5's kimi_k2). {UNCOMPUTED}")


__all__ = ["LAYERS_FIX", "SET_FIX", "UNCOMPUTED", "UnsupportedTarget", "config_path", "layer_types_check",
           "moe_check", "moe_refusal", "moe_sizes", "mrope_check", "mrope_covers", "refused", "rope_layers_check",
           "rotary_check", "text_type_check"]
