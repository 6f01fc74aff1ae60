"""The values of a checkpoint's config that draftsmith would misread, said before any module is built: sizes and
head counts within draftsmith/limits.py, flags, numbers, token ids, the activation, rope parameters, nested objects,
and an EAGLE-3 draft config's tap ids. Each problem is 'field: what is wrong', in the keys the file uses."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from draftsmith import limits
from draftsmith.components.dims import per_layer_type
from draftsmith.errors import short, short_text
from draftsmith.values import is_int, is_number

MLA_KEYS = ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "kv_lora_rank", "v_head_dim")
OBJECTS = ("eagle_config", "text_config", "transformer_layer_config")   # an object (or null) when present


def object_problems(cfg: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The nested fields (``eagle_config``, ``text_config``, ``transformer_layer_config``) that are not objects."""
    return [f"{prefix}{key} is {short(cfg[key])}; an object is expected" for key in OBJECTS
            if cfg.get(key) is not None and not isinstance(cfg[key], Mapping)]


# field -> (largest value, smallest value); every one must be an integer when present
_SIZES = {"num_hidden_layers": (limits.TARGET_LAYERS, 1), "hidden_size": (limits.WIDTH, 1),
          "intermediate_size": (limits.WIDTH, 1), "head_dim": (limits.WIDTH, 1),
          "num_attention_heads": (limits.HEADS, 1), "num_key_value_heads": (limits.HEADS, 1),
          "vocab_size": (limits.VOCAB, 1), "draft_vocab_size": (limits.VOCAB, 1),
          "max_position_embeddings": (1 << 31, 1), "sliding_window": (1 << 31, 0),
          "num_nextn_predict_layers": (limits.DRAFT_LAYERS, 0), "num_mtp_layers": (limits.DRAFT_LAYERS, 0),
          "hc_mult": (limits.HEADS, 0),
          "q_lora_rank": (limits.WIDTH, 1), "kv_lora_rank": (limits.WIDTH, 1),   # MLA (null: absent)
          "qk_rope_head_dim": (limits.WIDTH, 1), "qk_nope_head_dim": (limits.WIDTH, 0),
          "v_head_dim": (limits.WIDTH, 1)}
_POSITIVE = ("rms_norm_eps", "rope_theta")
_FLAGS = ("rope_interleave", "bias", "qkv_bias", "attention_bias", "mlp_bias", "tie_word_embeddings",
          "use_sliding_window")   # true or false when present (bool("false") is True)
# the MLP activations draftsmith computes (components.mlp.SwiGLU: silu); absent is silu (transformers' Llama default)
ACTIVATIONS = ("silu", "swish")
# a draft config's fusion flags (EAGLE-3's, speculators' EAGLE-1 ones): true or false when present, as _FLAGS
DRAFT_FLAGS = ("norm_before_residual", "fc_norm", "norm_before_fc", "norm_output", "fusion_bias", "layernorms",
               "use_last_layernorm", "use_input_layernorm_in_first_layer", "use_mtp_layernorm")   # + Model-Optimizer's
_TOKEN_IDS = ("eos_token_id", "bos_token_id", "pad_token_id")
_NESTED = ("text_config", "transformer_layer_config")

# keys no tensor name or shape of a draft depends on: with a bad value set aside (its default taken), the tensors
# can still be checked, so one run reports both (numerics, rotary, windows, token ids, the activation, and the layer
# count: a draft's layers are counted from its tensor names, never num_hidden_layers, which a published midlayer
# draft states as 40)
SHAPELESS = frozenset({"rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings",
                       "sliding_window", "use_sliding_window", "rope_interleave", "tie_word_embeddings", "hidden_act",
                       "num_hidden_layers", *_TOKEN_IDS})


def config_problems(cfg: Mapping[str, Any], prefix: str = "", keys: Mapping[str, str] | None = None) -> list[str]:
    """Every size, head count and token id of a config that draftsmith would misread or that would build for
    minutes (limits.py), as 'field: what is wrong'. Fields that are absent take their defaults later. ``keys``:
    the name each field is written under in the file (a params.json's ``dim``), for the messages."""
    return [message for _, message in keyed_problems(cfg, prefix, keys)]


def keyed_problems(cfg: Mapping[str, Any], prefix: str = "",
                   keys: Mapping[str, str] | None = None) -> list[tuple[tuple[str, ...], str]]:
    """:func:`config_problems` with the key each is about, as a path into ``cfg`` (a nested config's key after
    its parent's: ``("text_config", "vocab_size")``); a problem of two keys is about the one it names first."""
    def name(key: str) -> str:
        return f"{prefix}{(keys or {}).get(key, key)}"

    out: list[tuple[tuple[str, ...], str]] = []
    for key, (most, least) in _SIZES.items():
        v = cfg.get(key)
        if v is None:
            continue
        if not is_int(v):
            out.append(((key,), f"{name(key)} is {short(v)}; an integer is expected"))
        elif not least <= v <= most:
            out.append(((key,), f"{name(key)} is {short(v)}; allowed {least}..{most} (draftsmith/limits.py)"))
    for key in _POSITIVE:
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                              or v <= 0):
            out.append(((key,), f"{name(key)} is {short(v)}; a positive number is expected"))
    out += [((key,), f"{name(key)} is {short(cfg[key])}; true or false is expected") for key in _FLAGS
            if cfg.get(key) is not None and not isinstance(cfg[key], bool)]
    out += [(("hidden_act",), m) for m in activation_problems(cfg, name)]
    for key in _TOKEN_IDS:
        if (why := token_id_problem(cfg.get(key), unread=key != "eos_token_id")) is not None:
            out.append(((key,), f"{name(key)} is {short(cfg.get(key))}; {why}"))
    heads, kv, hidden = (cfg.get(k) for k in ("num_attention_heads", "num_key_value_heads", "hidden_size"))
    if is_int(heads) and is_int(kv) and heads >= 1 and kv >= 1 and heads % kv:
        out.append((("num_key_value_heads",),
                    f"{name('num_key_value_heads')} ({kv}) must divide {name('num_attention_heads')} ({heads})"))
    if (is_int(heads) and is_int(hidden) and heads >= 1 and cfg.get("head_dim") is None and hidden % heads
            and not any(cfg.get(k) is not None for k in MLA_KEYS)):
        out.append((("hidden_size",), f"{name('hidden_size')} ({hidden}) is not a multiple of "
                                      f"{name('num_attention_heads')} ({heads}) and no {name('head_dim')} is given"))
    out += [((key,), m) for key in ("rope_scaling", "rope_parameters") if key in cfg
            for m in rope_problems({key: cfg[key]}, prefix)]
    if (v := cfg.get("partial_rotary_factor")) is not None and not is_number(v):
        out.append((("partial_rotary_factor",), f"{name('partial_rotary_factor')} is {short(v)}; a number in (0, 1] "
                                                "is expected (the share of each head's channels the rotation turns)"))
    if "model_type" in cfg and not isinstance(cfg["model_type"], str):
        out.append((("model_type",), f"{name('model_type')} is {short(cfg['model_type'])}; a string is expected"))
    out += [((key,), m) for key in OBJECTS if key in cfg for m in object_problems({key: cfg[key]}, prefix)]
    for key in _NESTED:
        if isinstance(cfg.get(key), Mapping):
            out += [((key, *path), m) for path, m in keyed_problems(cfg[key], f"{prefix}{key}.")]
    return out


def fusion_value_problems(cfg: Mapping[str, Any]) -> list[str]:
    """A draft config's values for its fusion that no fusion can read: the tap ids and aux count, each the value
    a fusion reads (eagle3_config: the first of eagle_config's ids, the top level's, target_layer_ids that is not
    empty; for the count eagle_config's, else the top level's), and its flags (:data:`DRAFT_FLAGS`, read by
    ``bool()``: the string "false" would be true). Said naming the file, where they were said as a problem of the
    spec's file, which the user may never have written. A draft config's only (draft_hf_config, inspect)."""
    from draftsmith.components.eagle3_config import AUX_COUNT, KEY, TAP_IDS, aux_count_fault, tap_ids_fault

    inner = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), Mapping) else {}
    ids = next(((path, v) for path, v in ((f"eagle_config.{KEY}", inner.get(KEY)), (KEY, cfg.get(KEY)),
                                          ("target_layer_ids", cfg.get("target_layer_ids"))) if v), None)
    out = [f"{ids[0]} is {short(ids[1])}; {TAP_IDS} is expected"] if ids and tap_ids_fault(ids[1]) else []
    count = (("eagle_config.num_aux_hidden_states", inner["num_aux_hidden_states"])
             if inner.get("num_aux_hidden_states") is not None else
             ("num_aux_hidden_states", cfg.get("num_aux_hidden_states")))
    if aux_count_fault(count[1]):
        out.append(f"{count[0]} is {short(count[1])}; {AUX_COUNT} is expected")
    for key in DRAFT_FLAGS:   # each where the fusion reads it: eagle_config's, else the top level's
        path, value = (f"eagle_config.{key}", inner[key]) if inner.get(key) is not None else (key, cfg.get(key))
        if value is not None and not isinstance(value, bool):
            out.append(f"{path} is {short(value)}; true or false is expected")
    return out


def activation_problems(cfg: Mapping[str, Any], name=lambda key: key) -> list[str]:
    """``hidden_act`` other than silu: every MLP draftsmith builds computes silu(gate) * up, so another activation
    would load and decode silently wrong."""
    act, kind = cfg.get("hidden_act"), cfg.get("model_type")
    if act is None or (isinstance(act, str) and act in ACTIVATIONS) or not reads_hidden_act(kind) or \
            record_checks_activation(kind):
        return []
    return [(f"{name('hidden_act')} is {short(act)}; draftsmith's MLP (swiglu) computes silu: allowed "
             f"{', '.join(ACTIVATIONS)} (absent: silu)")]


def reads_hidden_act(kind: Any) -> bool:
    """Whether transformers' model of type ``kind`` reads ``hidden_act``: false where its config class declares
    ``hidden_activation`` and no hidden_act (Gemma-2, Gemma-3: a hidden_act the Hub's file states beside it is
    unread; their target records check hidden_activation), true otherwise (a type transformers does not know, a
    config without one). transformers is imported only for a config that states another activation than silu."""
    from transformers import CONFIG_MAPPING

    if not isinstance(kind, str) or kind not in CONFIG_MAPPING:
        return True
    fields = getattr(CONFIG_MAPPING[kind], "__dataclass_fields__", None) or {}
    return "hidden_act" in fields or "hidden_activation" not in fields


def record_checks_activation(kind: Any) -> bool:
    """Whether the built-in target record of type ``kind`` checks ``hidden_act`` itself (its options name it: Gemma-1,
    whose GeGLU MLP is hidden_act's), against the value transformers' config class makes of it (GemmaConfig reads
    the Hub's legacy "gelu" as gelu_pytorch_tanh): then silu is not what its MLP computes."""
    from draftsmith.components.targets import TARGETS

    made = TARGETS.get(kind) if isinstance(kind, str) else None
    return made is not None and "hidden_act" in dict(made().options)


# rope types whose rotation of text is default (1-D) rope: Qwen2-VL's multimodal 'mrope' (the Hub's Qwen2-VL /
# Qwen2.5-VL config.json and SpecForge's drafts for them: equal position streams for text; its mrope_section is
# checked where the head is known: targets.mrope_check, config.mrope_as_default)
TEXT_ROPES = ("default", "mrope")


# rope types early checkpoints name by a name transformers has since dropped (Phi-3-128k's first uploads: su)
RENAMED_ROPES = {"su": "longrope"}


def rope_problems(cfg: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``rope_scaling`` / ``rope_parameters`` (one mapping, or one per layer type): a rope type transformers knows
    and positive numbers, checked before the rotary frequencies are computed at build."""
    out = []
    for key in ("rope_scaling", "rope_parameters"):
        value = cfg.get(key)
        if value is None:
            continue
        parts = value.items() if per_layer_type(value) else [("", value)]
        for sub, params in parts:
            where = f"{prefix}{key}{'.' if sub else ''}{short_text(str(sub), 40)}"
            if not isinstance(params, Mapping):
                out.append(f"{where} is {short(params)}; an object is expected")
                continue
            said = "rope_type" if "rope_type" in params else "type"   # the key the file writes
            kind = params.get(said, "default")
            if kind not in TEXT_ROPES and (not isinstance(kind, str) or kind not in rope_kinds()):
                later = RENAMED_ROPES.get(kind) if isinstance(kind, str) else None
                out.append(f"{where}.{said} is {short(kind)}; known: {', '.join([*TEXT_ROPES, *rope_kinds()])}"
                           + (f" ('{kind}' is {later}'s earlier name: write {later})" if later else ""))
            out += rope_number_problems(params, where)
    return out


# a rope's numbers (transformers' rope parameters) that must be positive, those where 0 turns a part off (yarn's
# mscale), and the per-frequency lists (longrope): a NaN, an infinity or a 0 there computes NaN rotations, which
# load and then fail at the first forward as a numeric overflow; the partial rotary factor's range is the type's
# (TargetArch.partial_rotary)
ROPE_POSITIVE = ("rope_theta", "factor", "original_max_position_embeddings", "attention_factor", "beta_fast",
                 "beta_slow", "low_freq_factor", "high_freq_factor")
ROPE_NON_NEGATIVE = ("mscale", "mscale_all_dim")
ROPE_LISTS = ("short_factor", "long_factor")


def rope_number_problems(params: Mapping[str, Any], where: str) -> list[str]:
    """The numbers of one rope (``where``: its dotted path) that compute no rotation, as 'field: what is wrong'."""
    out = [f"{where}.{name} is {short(v)}; a positive number is expected" for name in ROPE_POSITIVE
           if (v := params.get(name)) is not None and not (is_number(v) and v > 0)]
    out += [f"{where}.{name} is {short(v)}; a number >= 0 is expected (0: off)" for name in ROPE_NON_NEGATIVE
            if (v := params.get(name)) is not None and not (is_number(v) and v >= 0)]
    if (v := params.get("partial_rotary_factor")) is not None and not is_number(v):
        out.append(f"{where}.partial_rotary_factor is {short(v)}; a number in (0, 1] is expected (the share of each "
                   "head's channels the rotation turns)")
    if (v := params.get("truncate")) is not None and not isinstance(v, bool):
        out.append(f"{where}.truncate is {short(v)}; true or false is expected")
    for name in ROPE_LISTS:
        if (v := params.get(name)) is None:
            continue
        if not isinstance(v, list):
            out.append(f"{where}.{name} is {short(v)}; a list of positive numbers is expected (one a frequency)")
            continue
        if bad := [i for i, x in enumerate(v) if not (is_number(x) and x > 0)]:
            more = f" (and {len(bad) - 1} more of its {len(v)})" if len(bad) > 1 else ""
            out.append(f"{where}.{name}[{bad[0]}] is {short(v[bad[0]])}{more}; a positive number is expected (each "
                       "frequency's divisor)")
    return out


def token_id_problem(value: Any, unread: bool = False) -> str | None:
    """Why a token-id field (eos_token_id, ...) is unusable: it must be null, an integer >= 0 or a list of them.
    ``unread``: a field draftsmith reads nothing from (bos_token_id, pad_token_id), only typed as transformers
    types it: any integer (some Llama exports write pad_token_id: -1, which transformers loads)."""
    items = value if isinstance(value, list) else [value]
    if value is None or all(is_int(i) and (unread or 0 <= i < limits.VOCAB) for i in items):
        return None
    return "token ids are integers (or a list of them)" if unread else "token ids are integers >= 0 (or a list of them)"


def rope_kinds():
    """The rope types transformers computes (imported here: transformers costs ~2 s, which an error about a spec or
    an option need not wait for)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ROPE_INIT_FUNCTIONS
