"""Reading checkpoint configs. Targets go through transformers' AutoConfig (no remote code); drafts through a
plain ``LlamaConfig`` so missing keys take transformers' Llama defaults, exactly as the drafts were trained."""
from __future__ import annotations

import codecs
import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from draftsmith.assembler.checkpoint import read_json
from draftsmith.assembler.config_values import (MLA_KEYS, SHAPELESS, fusion_value_problems, keyed_problems,
                                                object_problems, token_id_problem)
from draftsmith.assembler.styles import EAGLE_FIELDS, STYLES, ConfigStyle, style_of, to_facts
from draftsmith.components.eagle3_keys import MODELOPT_KEYS
from draftsmith.components.targets import mrope_covers
from draftsmith.errors import CheckpointError, Problem, SpecError, short, short_list, short_text
from draftsmith.paths import checkpoint_folder, required_config

if TYPE_CHECKING:
    from transformers import PretrainedConfig

RECURRENT_LAYER_TYPES = ("mamba", "linear_attention", "mamba2", "recurrent")
# Config keys draftsmith reads or knowingly skips, beyond a Llama config's own (in facts' names: a params.json's are
# renamed first, :func:`known_keys` adds them for its own file).
READ_KEYS = {*EAGLE_FIELDS, *MLA_KEYS, *STYLES["speculators"].fixed, "eagle_config", "bias",
             "qkv_bias", "num_aux_hidden_states", "target_layer_ids", "architectures", "model_type",
             "transformers_version", "torch_dtype", "dtype", "hc_mult", "rope_interleave", "first_k_dense_replace",
             "rope_theta", "rope_scaling",   # transformers 5 reads them into rope_parameters, as MLA reads either
             "fusion_bias", "layernorms", "transformer_layer_architecture",   # these three: speculators' EAGLE-1
             "num_nextn_predict_layers", "num_mtp_layers",   # an MTP draft's layer count (components/mtp.py)
             *MODELOPT_KEYS}   # an EAGLE-3 draft's Model-Optimizer flags, honoured or refused (eagle3_config)
# what a draft's config must state: transformers' Llama defaults (hidden_size 4096, 32 heads) are no draft's, and
# they fail late under another name (share.embed) or not at all (32 heads of 2 fit the q_proj of 4 heads of 16);
# a missing intermediate_size is left to the weights' shapes, which name the MLP's tensors
DRAFT_SIZES = ("hidden_size", "num_attention_heads")
# what a target's config must state (at top level, or under a multimodal type's text_config): transformers' Llama
# defaults (32 layers 4096 wide, a 32000-token vocabulary) are no target's, and a missing one failed as missing or
# misshapen tensors that never named the key; num_key_value_heads and head_dim legitimately default (from the heads)
TARGET_SIZES = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size")


class ConfigFacts(dict):
    """A checkpoint's config as :func:`read_config` returns it (Hugging Face names), with the file it was read from
    and the key each fact is written under there (a ``params.json`` says ``dim`` for hidden_size), so that a later
    check names the file and the key the user wrote."""

    def __init__(self, facts: Mapping[str, Any], file: Path, written: Mapping[str, str] | None = None):
        super().__init__(facts)
        self.file, self.written = Path(file), dict(written or {})

    def key(self, fact: str) -> str:
        return self.written.get(fact, fact)


DRAFT_CONFIG = "draft config "   # the path a fusion's problem of what the draft's config.json states starts with


def draft_error(spec, draft_raw: Mapping[str, Any], problems: list[Problem]) -> SpecError:
    """``spec.error(problems)``, unless every problem is one of what the draft's config states ('draft config KEY': a
    fusion's refusal of use_last_layernorm beside norm_output or a held norm.weight, of a Model-Optimizer flag it does
    not compute): then a problem of the draft's config file (``draft_raw.file``), as inspect and convert say it."""
    if problems and isinstance(draft_raw, ConfigFacts) and all(p.path.startswith(DRAFT_CONFIG) for p in problems):
        return SpecError(str(draft_raw.file), problems)
    return spec.error(problems)


def text_keys(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A target's config.json as its text model's keys: a multimodal type's ``text_config`` (Qwen3-VL's, where
    ``vocab_size`` and ``num_hidden_layers`` are) over the top level, which holds them in any other config."""
    text = raw.get("text_config")
    return {**raw, **text} if isinstance(text, Mapping) else dict(raw)


def target_text_keys(folder: str | Path) -> dict[str, Any]:
    """A target folder's config.json as its text model's keys (:func:`text_keys`), with the sizes a ``text_config``
    leaves to its type's defaults (:func:`missing_target_keys`: the Hub's Gemma-3 4B states no vocab_size nor
    num_attention_heads there) taken from transformers' reading of the file, as the target is built."""
    raw = read_raw_config(folder)
    keys, text = text_keys(raw), raw.get("text_config")
    typed = isinstance(text, Mapping) and isinstance(text.get("model_type"), str)   # else keys as written
    if typed and (missing := [k for k in (*TARGET_SIZES, "num_key_value_heads") if keys.get(k) is None]):
        text = text_model_config(read_target_config(folder))
        keys |= {k: getattr(text, k) for k in missing if getattr(text, k, None) is not None}
    return keys


def read_raw_config(folder: str | Path) -> dict[str, Any]:
    """The checkpoint's config file as written: ``config.json``, else Mistral's ``params.json``."""
    folder = checkpoint_folder(folder)
    file = required_config(folder)
    # read_json refuses a FIFO, a link out of the folder, a list, bad JSON
    raw = read_json(file, folder, what="config (a JSON object of fields)")
    if problems := object_problems(raw):  # every reader of the config may look inside these
        raise CheckpointError(file, "; ".join(problems))
    return raw


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
            f"draft's sizes){unread_sizes(flat, raw)}")


def known_keys(style: ConfigStyle | None = None) -> set[str]:
    """The config keys a draft config is read by (a Llama config's, :data:`READ_KEYS`), in facts' names, and the
    names ``style`` (the file's, where its keys are read as written) renames: Mistral's own (n_heads) are known in
    a params.json and another model's in a config.json."""
    from transformers import LlamaConfig

    own = set(style.rename) if style is not None else set()
    return {*LlamaConfig().to_dict(), *LlamaConfig.attribute_map, *READ_KEYS, *own}


def _unread(flat: Mapping[str, Any], raw: Mapping[str, Any], kept, show) -> list[str]:
    """'key: value' (``show(value)``) for the keys of ``flat`` no Llama config and no draftsmith reading takes whose
    value ``kept`` keeps, in the names the file writes them under."""
    known = known_keys()
    return [f"{written_key(raw)(k)}: {show(v)}" for k, v in flat.items() if k not in known and kept(v)]


def unread_sizes(flat: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    """'; it has d_model: 64, n_heads: 4, which nothing reads: ...' for the whole-number keys of a config no Llama
    config and no draftsmith reading takes (sizes under another model's names), or ''."""
    found = _unread(flat, raw, lambda v: isinstance(v, int) and not isinstance(v, bool), str)
    return (f"; it has {short_list(found, 6, 300, quote=False)}, which nothing reads: if these are its sizes under "
            "another model's names, rename them" if found else "")


def unread_eps(flat: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    """'; the config has norm_eps: 1e-05, which nothing reads: ...' for the small positive floats (at most 0.01: a
    norm's epsilon) under keys nothing reads (as :func:`unread_sizes`), or ''."""
    found = _unread(flat, raw, lambda v: isinstance(v, float) and 0 < v <= 1e-2, lambda v: f"{v:g}")
    return (f"; the config has {short_list(found, 4, 300, quote=False)}, which nothing reads: if "
            f"{'that' if len(found) == 1 else 'one'} is its norms' epsilon under another model's name, rename it "
            "rms_norm_eps" if found else "")


def missing_target_keys(raw: Mapping[str, Any], known: list[str]) -> str | None:
    """What a target config lacks of its ``model_type`` and :data:`TARGET_SIZES` (in the keys its file uses), all
    at once, or None. A size under ``text_config`` counts (a multimodal type's text model). ``known``: the target
    types registered, which a missing model_type is told. Checked before transformers reads the config, which would
    give every missing size its Llama default and the model_type the string 'None'. A ``text_config`` that names its
    type is a sub-config transformers writes as its differences from that type's defaults (the Hub's Gemma-3 4B /
    12B / 27B state no vocab_size there, 4B no num_attention_heads): its sizes are its class's, not a Llama's."""
    text = raw.get("text_config") if isinstance(raw.get("text_config"), Mapping) else {}
    checked = () if isinstance(text.get("model_type"), str) else TARGET_SIZES
    missing = [k for k in ("model_type", *checked) if raw.get(k) is None and text.get(k) is None]
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


def draft_hf_config(raw: Mapping[str, Any], source: str | Path = "draft config.json") -> PretrainedConfig:
    """The draft's config as a ``LlamaConfig`` (absent keys take transformers' Llama defaults, except the sizes,
    which must be stated). Errors name the file the config was read from (``raw.file`` when :func:`read_config`
    read it: a params.json too), else ``source``; so does the result's ``name_or_path``, for later checks."""
    source = raw.file if isinstance(raw, ConfigFacts) else source
    if (why := missing_sizes(raw)) is not None:
        raise CheckpointError(source, why)
    if faults := fusion_value_problems(raw):
        raise CheckpointError(source, "; ".join(faults))
    from transformers import LlamaConfig

    keep = {k: v for k, v in flatten_draft_config(raw).items() if k not in ("architectures", "model_type")}
    try:
        cfg = LlamaConfig(**keep)
    except Exception as exc:  # noqa: BLE001 (transformers' own checks: strict dataclass, dtype, ... errors)
        raise CheckpointError(source, f"transformers cannot read it: {short_text(exc, 300)}") from None
    cfg.name_or_path = str(source)   # a component's config check names the file (mla: its required keys)
    mrope_as_default(cfg, source)
    return cfg


def mrope_as_default(cfg: PretrainedConfig, source: str | Path) -> None:
    """A draft config stating its Qwen2-VL-family target's multimodal rope (SpecForge's qwen2-5-vl-eagle3.json:
    ``rope_scaling: {type: mrope, mrope_section: [16, 24, 24]}``) rotates text as default rope of the same theta
    (its three position streams are equal for text), as transformers' Qwen2-VL config reads the type: read so, where
    ``mrope_section`` gives each of a head's rotary frequencies to one stream (else CheckpointError at ``source``)."""
    params = getattr(cfg, "rope_parameters", None)
    if not isinstance(params, Mapping) or params.get("rope_type", params.get("type")) != "mrope":
        return
    half = (getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads) // 2
    section = params.get("mrope_section")
    if not mrope_covers(section, half):
        raise CheckpointError(source, f"rope_scaling.mrope_section is {short(section)} (rope type mrope): it does not "
                              f"give each of a head's {half} rotary frequencies to one of the three position streams, "
                              "so its rotation of text is not the 1-D rope draftsmith computes; allowed: three "
                              f"non-negative ints summing to head_dim / 2 = {half}")
    cfg.rope_parameters = {**params, "rope_type": "default"} | ({"type": "default"} if "type" in params else {})


def target_hf_config(folder: str | Path, registry=None) -> PretrainedConfig:
    """The target's config as draftsmith reads it (:func:`text_model_config` of :func:`read_target_config`), its
    problems a CheckpointError naming config.json. ``registry``: the one its type's record is looked up in (default:
    the process-wide one)."""
    read_config(folder)  # checked before transformers reads it (a FIFO, a list, a float head count, ...)
    try:
        return text_model_config(read_target_config(folder, registry))
    except Exception as exc:  # noqa: BLE001 (transformers' own checks raise strict-dataclass, index, ... errors)
        file = Path(folder) / "config.json"
        try:
            with file.open("rb") as f:
                bom = f.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8   # read_config reads past one, transformers not
        except OSError:   # none: read_config read a params.json (Mistral's), which transformers does not read
            bom = False
        raise CheckpointError(file, "it starts with a UTF-8 byte-order mark, which transformers does not read: save "
                              "it as UTF-8 without the mark" if bom else
                              f"transformers cannot read it: {short_text(exc, 300)}") from None


def read_target_config(folder: str | Path, registry=None) -> PretrainedConfig:
    """transformers' config of a target folder, never running its remote code: AutoConfig's (trust_remote_code
    false); or, for a model_type transformers has no class for whose registered target reads it as another type's
    (its record's ``config_as``: Kimi-K2's kimi_k2 as deepseek_v3, as transformers itself reads Kimi-K2.5's
    text_config), that type's config class over the file, with the file's model_type (its record, its refusals)."""
    from transformers import CONFIG_MAPPING, AutoConfig

    kind = read_raw_config(folder).get("model_type")
    as_type = None
    if isinstance(kind, str) and kind not in CONFIG_MAPPING:
        from draftsmith.components.targets import target_record
        from draftsmith.registry import default_registry

        as_type = getattr(target_record(registry or default_registry(), kind), "config_as", None)
    if as_type is None:
        return AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    if as_type not in CONFIG_MAPPING:
        raise ValueError(f"the {kind} target reads it as model_type {as_type!r}, which transformers has no config "
                         "class for")
    reader = CONFIG_MAPPING[as_type]
    written, kwargs = reader.get_config_dict(str(folder), name_or_path=str(folder))   # as AutoConfig passes it
    cfg = reader.from_dict({**written, "model_type": as_type}, **kwargs)
    cfg.model_type = kind
    return cfg


def text_config(cfg: PretrainedConfig) -> PretrainedConfig:
    """The config of the text model: a declared sub-config (a multimodal type's ``text_config``), else ``cfg``.
    A ``text_config`` key in the config.json of a type that declares none (Llama) stays a plain dict, which
    transformers' model ignores, and so does draftsmith."""
    from transformers import PretrainedConfig

    getter = getattr(cfg, "get_text_config", None)
    text = getter() if getter else cfg
    return text if isinstance(text, PretrainedConfig) else cfg


# what a multimodal type's outer config holds for its text model: its type (the target record's name), the folder,
# whether lm_head is the embedding (transformers 5 ties by the outer config's key) and the weights' quantization
OUTER_KEYS = ("model_type", "name_or_path", "tie_word_embeddings", "quantization_config")


def text_model_config(cfg: PretrainedConfig) -> PretrainedConfig:
    """The target's config as draftsmith reads it: ``cfg`` itself, or for a multimodal type (Qwen2.5-VL: its text
    model's keys under ``text_config``) a copy of its text model's config with :data:`OUTER_KEYS` taken from ``cfg``
    (the text model alone is the target: draftsmith decodes text; the vision tower is not built)."""
    text = text_config(cfg)
    if text is cfg:
        return cfg
    out = copy.copy(text)
    for key in OUTER_KEYS:
        if hasattr(cfg, key):
            setattr(out, key, getattr(cfg, key))
    return out


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
