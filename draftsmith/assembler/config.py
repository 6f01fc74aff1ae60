"""Reading checkpoint configs. Targets go through transformers' AutoConfig (no remote code); drafts through a
plain ``LlamaConfig`` so missing keys take transformers' Llama defaults, exactly as the drafts were trained."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from draftsmith import limits
from draftsmith.assembler.checkpoint import read_json
from draftsmith.paths import checkpoint_folder
from draftsmith.errors import CheckpointError, CheckpointNotFound, short, short_text

from draftsmith.assembler.styles import STYLES, style_of, to_facts

if TYPE_CHECKING:
    from transformers import PretrainedConfig

MLA_KEYS = ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "kv_lora_rank", "v_head_dim")
RECURRENT_LAYER_TYPES = ("mamba", "linear_attention", "mamba2", "recurrent")
# what a draft's config must state: transformers' Llama defaults (hidden_size 4096, 32 heads) are no draft's, and
# they fail late under another name (share.embed) or not at all (32 heads of 2 fit the q_proj of 4 heads of 16);
# a missing intermediate_size is left to the weights' shapes, which name the MLP's tensors
DRAFT_SIZES = ("hidden_size", "num_attention_heads")
# what a target's config must state (at top level, or under a multimodal type's text_config): transformers' Llama
# defaults (32 layers 4096 wide, a 32000-token vocabulary) are no target's, and a missing one failed as missing or
# misshapen tensors that never named the key; num_key_value_heads and head_dim legitimately default (from the heads)
TARGET_SIZES = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size")
OBJECTS = ("eagle_config", "text_config", "transformer_layer_config")   # an object (or null) when present


class ConfigFacts(dict):
    """A checkpoint's config as :func:`read_config` returns it (Hugging Face names), with the file it was read from
    and the key each fact is written under there (a ``params.json`` says ``dim`` for hidden_size), so that a later
    check names the file and the key the user wrote."""

    def __init__(self, facts: Mapping[str, Any], file: Path, written: Mapping[str, str] | None = None):
        super().__init__(facts)
        self.file, self.written = Path(file), dict(written or {})

    def key(self, fact: str) -> str:
        return self.written.get(fact, fact)


def config_file(folder: Path) -> Path | None:
    """The config file of a checkpoint folder: ``config.json``, else Mistral's ``params.json`` (a broken link is
    there too: regular_file says so when it is read); None for neither."""
    return next((folder / n for n in ("config.json", "params.json")
                 if (folder / n).exists() or (folder / n).is_symlink()), None)


def read_raw_config(folder: str | Path) -> dict[str, Any]:
    """The checkpoint's config file as written: ``config.json``, else Mistral's ``params.json``."""
    folder = checkpoint_folder(folder)
    if (file := config_file(folder)) is not None:
        # read_json refuses a FIFO, a link out of the folder, a list, bad JSON
        raw = read_json(file, folder, what="config (a JSON object of fields)")
        if problems := object_problems(raw):  # every reader of the config may look inside these
            raise CheckpointError(file, "; ".join(problems))
        return raw
    raise CheckpointNotFound(f"{short_text(folder, 300)}: no config.json or params.json (a checkpoint folder needs "
                             "a config + weights)")


def object_problems(cfg: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The nested fields (``eagle_config``, ``text_config``, ``transformer_layer_config``) that are not objects."""
    return [f"{prefix}{key} is {short(cfg[key])}; an object is expected" for key in OBJECTS
            if cfg.get(key) is not None and not isinstance(cfg[key], Mapping)]


def read_config(folder: str | Path) -> ConfigFacts:
    """``config.json`` as written; a Mistral ``params.json`` is translated to Hugging Face names (its config
    style, :mod:`draftsmith.assembler.styles`), so sizes are read in one place whatever the layout. A problem
    names the file and the key as written (``params.json: dim is '64'``)."""
    reading = read_config_aside(folder)
    if reading.error is not None:  # sizes bounded before any module is built on meta
        raise reading.error
    return reading.config


class ConfigReading(NamedTuple):
    """A config read past its problems (:func:`read_config_aside`)."""

    config: ConfigFacts        # without the keys set aside
    error: CheckpointError | None   # what read_config raises, or None
    aside: list[str]           # keys (as written) of problems no tensor depends on: left out, their defaults taken
    shaping: list[str]         # keys (as written) of the other problems: the expected tensors depend on them


def read_config_aside(folder: str | Path) -> ConfigReading:
    """What :func:`read_config` reads, for a check that goes on past a config problem where it safely can: the keys
    of problems no tensor name or shape depends on (:data:`SHAPELESS`) are left out of the config (they take their
    defaults), and the error read_config raises is returned, not raised."""
    raw = read_raw_config(folder)
    style = style_of(folder, raw)
    written = {fact: key for key, fact in style.rename.items()}
    cfg = to_facts(raw, style) if style is STYLES["mistral"] else raw
    file = Path(folder) / style.file
    problems = keyed_problems(cfg, keys=written)
    if not problems:
        return ConfigReading(ConfigFacts(cfg, file, written), None, [], [])

    def named(path: tuple[str, ...]) -> str:
        return ".".join((*path[:-1], written.get(path[-1], path[-1])))

    aside = {path for path, _ in problems if path[-1] in SHAPELESS}
    return ConfigReading(ConfigFacts(_without(cfg, aside), file, written),
                         CheckpointError(file, "; ".join(m for _, m in problems)),
                         list(dict.fromkeys(named(path) for path, _ in problems if path in aside)),
                         list(dict.fromkeys(named(path) for path, _ in problems if path not in aside)))


def _without(cfg: Mapping[str, Any], paths: set[tuple[str, ...]]) -> dict[str, Any]:
    """A copy of ``cfg`` without the keys at ``paths`` (a nested one inside a copy of its parent)."""
    out = dict(cfg)
    for path in sorted(paths, key=len):
        parent = out
        for key in path[:-1]:
            parent[key] = dict(parent[key])
            parent = parent[key]
        parent.pop(path[-1], None)
    return out


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
_TOKEN_IDS = ("eos_token_id", "bos_token_id", "pad_token_id")
_NESTED = ("text_config", "transformer_layer_config")

# keys no tensor name or shape of a draft depends on: with a bad value set aside (its default taken), the tensors
# can still be checked, so one run reports both (numerics, rotary, windows, token ids, the activation, and the layer
# count: a draft's layers are counted from its tensor names, never num_hidden_layers, which a published midlayer
# draft states as 40)
SHAPELESS = frozenset({"rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings",
                       "sliding_window", "use_sliding_window", "rope_interleave", "tie_word_embeddings", "hidden_act",
                       "num_hidden_layers", *_TOKEN_IDS})


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


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
        if not _is_int(v):
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
        if (why := token_id_problem(cfg.get(key))) is not None:
            out.append(((key,), f"{name(key)} is {short(cfg.get(key))}; {why}"))
    heads, kv, hidden = (cfg.get(k) for k in ("num_attention_heads", "num_key_value_heads", "hidden_size"))
    if _is_int(heads) and _is_int(kv) and heads >= 1 and kv >= 1 and heads % kv:
        out.append((("num_key_value_heads",),
                    f"{name('num_key_value_heads')} ({kv}) must divide {name('num_attention_heads')} ({heads})"))
    if (_is_int(heads) and _is_int(hidden) and heads >= 1 and cfg.get("head_dim") is None and hidden % heads
            and not any(cfg.get(k) is not None for k in MLA_KEYS)):
        out.append((("hidden_size",), f"{name('hidden_size')} ({hidden}) is not a multiple of "
                                      f"{name('num_attention_heads')} ({heads}) and no {name('head_dim')} is given"))
    out += [((key,), m) for key in ("rope_scaling", "rope_parameters") if key in cfg
            for m in rope_problems({key: cfg[key]}, prefix)]
    if "model_type" in cfg and not isinstance(cfg["model_type"], str):
        out.append((("model_type",), f"{name('model_type')} is {short(cfg['model_type'])}; a string is expected"))
    out += [((key,), m) for key in OBJECTS if key in cfg for m in object_problems({key: cfg[key]}, prefix)]
    for key in _NESTED:
        if isinstance(cfg.get(key), Mapping):
            out += [((key, *path), m) for path, m in keyed_problems(cfg[key], f"{prefix}{key}.")]
    return out


def tap_problems(cfg: Mapping[str, Any]) -> list[str]:
    """An EAGLE-3 draft config's tap ids and aux count that no fusion can read, each the value a fusion reads
    (eagle3_config: the first of eagle_config's ids, the top level's, target_layer_ids that is not empty; for the
    count eagle_config's, else the top level's): said naming the file, where they were said as a problem of the
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
    return out


def activation_problems(cfg: Mapping[str, Any], name=lambda key: key) -> list[str]:
    """``hidden_act`` other than silu: every MLP draftsmith builds computes silu(gate) * up, so another activation
    would load and decode silently wrong."""
    act = cfg.get("hidden_act")
    if act is None or (isinstance(act, str) and act in ACTIVATIONS):
        return []
    return [(f"{name('hidden_act')} is {short(act)}; draftsmith's MLP (swiglu) computes silu: allowed "
             f"{', '.join(ACTIVATIONS)} (absent: silu)")]


def rope_problems(cfg: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``rope_scaling`` / ``rope_parameters`` (one mapping, or one per layer type): a rope type transformers knows
    and positive numbers, checked before the rotary frequencies are computed at build."""
    out = []
    for key in ("rope_scaling", "rope_parameters"):
        value = cfg.get(key)
        if value is None:
            continue
        parts = value.items() if isinstance(value, Mapping) and value and all(
            isinstance(v, Mapping) for v in value.values()) else [("", value)]
        for sub, params in parts:
            where = f"{prefix}{key}{'.' if sub else ''}{short_text(str(sub), 40)}"
            if not isinstance(params, Mapping):
                out.append(f"{where} is {short(params)}; an object is expected")
                continue
            kind = params.get("rope_type", params.get("type", "default"))
            if kind != "default" and (not isinstance(kind, str) or kind not in rope_kinds()):
                out.append(f"{where}.rope_type is {short(kind)}; known: {', '.join(['default', *rope_kinds()])}")
            for name in ("rope_theta", "factor", "original_max_position_embeddings"):
                v = params.get(name)
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                                      or v <= 0):
                    out.append(f"{where}.{name} is {short(v)}; a positive number is expected")
    return out


def token_id_problem(value: Any) -> str | None:
    """Why a token-id field (eos_token_id, ...) is unusable: it must be null, an integer >= 0 or a list of them."""
    items = value if isinstance(value, list) else [value]
    if value is None or all(_is_int(i) and 0 <= i < limits.VOCAB for i in items):
        return None
    return "token ids are integers >= 0 (or a list of them)"


def clean_mla_keys(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Drop MLA keys that are null, so they never shadow a GQA draft's defaults."""
    return {k: v for k, v in cfg.items() if not (k in MLA_KEYS and v is None)}


def is_mla(cfg: Mapping[str, Any]) -> bool:
    """A draft is MLA when any MLA field is set (SGLang's rule); with none it is GQA."""
    return any(cfg.get(k) is not None for k in MLA_KEYS)


def flatten_draft_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A speculators config nests the layer's config under ``transformer_layer_config``; lift it up (the outer
    keys win) and drop null MLA keys."""
    inner = dict(raw.get("transformer_layer_config") or {})
    merged = {**inner, **{k: v for k, v in raw.items() if k != "transformer_layer_config"}}
    return clean_mla_keys(merged)


def written_key(raw: Mapping[str, Any]) -> Callable[[str], str]:
    """The name each key is written under in ``raw``'s file (a params.json's ``dim``), for the messages."""
    return raw.key if isinstance(raw, ConfigFacts) else (lambda k: k)


def missing_sizes(raw: Mapping[str, Any]) -> str | None:
    """What a draft config lacks of :data:`DRAFT_SIZES` (in the keys its file uses), or None: a missing size
    would silently become transformers' Llama default (a 4096-wide draft) and fail later under another name."""
    flat = flatten_draft_config(raw)
    missing = [k for k in DRAFT_SIZES if flat.get(k) is None]
    if not missing:
        return None
    key = written_key(raw)
    where = " (at top level or under transformer_layer_config)" if "transformer_layer_config" in raw else ""
    return (f"states no {', '.join(map(key, missing))}{where}; a draft's config must give "
            f"{', '.join(map(key, DRAFT_SIZES))} (transformers' Llama defaults, such as a hidden size of 4096, are no "
            "draft's sizes)")


def missing_target_keys(raw: Mapping[str, Any], known: list[str]) -> str | None:
    """What a target config lacks of its ``model_type`` and :data:`TARGET_SIZES` (in the keys its file uses), all
    at once, or None. A size under ``text_config`` counts (a multimodal type's text model). ``known``: the target
    types registered, which a missing model_type is told. Checked before transformers reads the config, which would
    give every missing size its Llama default and the model_type the string 'None'."""
    text = raw.get("text_config") if isinstance(raw.get("text_config"), Mapping) else {}
    missing = [k for k in ("model_type", *TARGET_SIZES) if raw.get(k) is None and text.get(k) is None]
    if not missing:
        return None
    key = written_key(raw)
    needs = [f"model_type (known targets: {', '.join(known) or 'none registered'})"] * ("model_type" in missing)
    sizes = missing != ["model_type"]
    needs += [f"{', '.join(map(key, TARGET_SIZES))} (at top level or under text_config)"] * sizes
    defaults = " transformers' defaults (a Llama of 32 layers 4096 wide) are no target's." * sizes
    them = "them" if len(missing) > 1 else "it"
    return (f"states no {', '.join(map(key, missing))}; a target's config must give {' and '.join(needs)}.{defaults} "
            f"Add {them} as the model's own config.json states {them} (save_pretrained writes every key)")


def rope_kinds():
    """The rope types transformers computes (imported here: transformers costs ~2 s, which an error about a spec or
    an option need not wait for)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ROPE_INIT_FUNCTIONS


def draft_hf_config(raw: Mapping[str, Any], source: str | Path = "draft config.json") -> PretrainedConfig:
    """The draft's config as a ``LlamaConfig`` (absent keys take transformers' Llama defaults, except the sizes,
    which must be stated). Errors name the file the config was read from (``raw.file`` when :func:`read_config`
    read it: a params.json too), else ``source``; so does the result's ``name_or_path``, for later checks."""
    source = raw.file if isinstance(raw, ConfigFacts) else source
    if (why := missing_sizes(raw)) is not None:
        raise CheckpointError(source, why)
    if taps := tap_problems(raw):
        raise CheckpointError(source, "; ".join(taps))
    from transformers import LlamaConfig

    keep = {k: v for k, v in flatten_draft_config(raw).items() if k not in ("architectures", "model_type")}
    try:
        cfg = LlamaConfig(**keep)
    except Exception as exc:  # noqa: BLE001 (transformers' own checks: strict dataclass, dtype, ... errors)
        raise CheckpointError(source, f"transformers cannot read it: {short_text(exc, 300)}") from None
    cfg.name_or_path = str(source)   # a component's config check names the file (mla: its required keys)
    return cfg


def target_hf_config(folder: str | Path) -> PretrainedConfig:
    from transformers import AutoConfig

    read_config(folder)  # checked before transformers reads it (a FIFO, a list, a float head count, ...)
    try:
        return AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 (transformers' own checks raise strict-dataclass, index, ... errors)
        raise CheckpointError(Path(folder) / "config.json", f"transformers cannot read it: "
                                                            f"{short_text(exc, 300)}") from None


def text_config(cfg: PretrainedConfig) -> PretrainedConfig:
    """The config of the text model: a declared sub-config (a multimodal type's ``text_config``), else ``cfg``.
    A ``text_config`` key in the config.json of a type that declares none (Llama) stays a plain dict, which
    transformers' model ignores, and so does draftsmith."""
    from transformers import PretrainedConfig

    getter = getattr(cfg, "get_text_config", None)
    text = getter() if getter else cfg
    return text if isinstance(text, PretrainedConfig) else cfg


def target_hidden_width(cfg: PretrainedConfig) -> int:
    """Width of the hidden states handed to the draft: hidden_size * hc_mult when hc_mult > 1."""
    text = text_config(cfg)
    mult = int(getattr(text, "hc_mult", 1) or 1)
    return text.hidden_size * mult if mult > 1 else text.hidden_size


def has_recurrent_layers(cfg: PretrainedConfig) -> bool:
    types = getattr(text_config(cfg), "layer_types", None) or ()
    return any(t in RECURRENT_LAYER_TYPES for t in types)


def stop_ids(folder: str | Path, cfg: PretrainedConfig) -> set[int]:
    ids: set[int] = set()
    gen = Path(folder) / "generation_config.json"
    sources = [getattr(cfg, "eos_token_id", None)]
    if gen.exists():
        eos = read_json(gen, Path(folder), what="generation config").get("eos_token_id")
        if (why := token_id_problem(eos)) is not None:
            raise CheckpointError(gen, f"eos_token_id is {short(eos)}; {why}")
        sources.append(eos)
    for v in sources:
        ids.update([v] if isinstance(v, int) else (v or []))
    return ids
