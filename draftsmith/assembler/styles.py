"""Config styles: how a layout stores the draft's config, as data, and the one translation to and from config
facts (a flat, Hugging-Face-named dict: what ``draft_hf_config`` reads).

- ``hf``: a flat Llama ``config.json`` (yuhuili / lmsys / SpecForge); aux ids under ``eagle_config``.
- ``speculators``: ``config.json`` with the EAGLE fields at top level and the layer's config nested under
  ``transformer_layer_config``; no top-level ``model_type`` (AutoConfig cannot read it).
- ``speculators-eagle``: the older speculators EAGLE-1 / HASS config (``speculators_model_type: eagle``, the layer's
  config under ``transformer_layer_config``, ``fusion_bias`` and ``layernorms`` at top level).
- ``mistral``: Mistral's ``params.json`` (``dim``, ``n_layers``, ``n_heads``, ...).

The config key ``norm_output`` means different things per style (FORMATS.md); facts hold it in spec terms
(``none`` | ``head`` | ``feed_back``) and each style's ``norm_output`` table translates.

A style's fixed ``model_type`` / ``architectures`` are what a plain Llama draft is written as; a draft of another
model type (an MLA draft's ``deepseek_v3``, SGLang's ``MistralLarge3ForCausalLMEagle``) keeps its own as facts, written
in place of the fixed ones (in a speculators config: in ``transformer_layer_config``, the layer's own).
"""
from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draftsmith.specs.resolve import dig, put

IDS = "eagle_aux_hidden_state_layer_ids"


@dataclass(frozen=True)
class ConfigStyle:
    name: str
    file: str                                            # the config file in the checkpoint folder
    rename: Mapping[str, str] = field(default_factory=dict)   # style key -> fact key
    nest: str | None = None                              # facts not in `outer` live under this key
    outer: tuple[str, ...] = ()                          # fact keys kept at top level when nesting
    fixed: Mapping[str, Any] = field(default_factory=dict)    # written as is, never read back as facts
    keep: tuple[str, ...] = ()                           # keys a renaming style also holds, under their own name
    ids_at: str = IDS                                    # dotted path where the aux ids are written
    norm_output: Mapping[bool, str] = field(default_factory=dict)  # config bool -> spec term (absent: dropped)
    unsaid: str | None = None   # the norm_output term every reader takes from an absent key (convert leaves it out)
    own: tuple[str, ...] = ()                            # fixed keys it says of itself (the verifier): a source's kept


EAGLE_FIELDS = ("draft_vocab_size", "target_hidden_size", IDS, "norm_before_residual", "norm_before_fc", "fc_norm",
                "norm_output")

STYLES: dict[str, ConfigStyle] = {s.name: s for s in (
    ConfigStyle("hf", "config.json", fixed={"architectures": ["LlamaForCausalLM"], "model_type": "llama"},
                ids_at=f"eagle_config.{IDS}", norm_output={True: "head", False: "none"}, unsaid="head"),
    ConfigStyle("speculators", "config.json", nest="transformer_layer_config", outer=EAGLE_FIELDS,
                fixed={"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
                       "speculators_version": "0.1.0",
                       "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                              "proposal_methods": [{"proposal_type": "greedy",
                                                                    "speculative_tokens": 5,
                                                                    "verifier_accept_k": 1,
                                                                    "accept_tolerance": 0.0}],
                                              "verifier": {"name_or_path": None, "architectures": None}},
                       "transformer_layer_config": {"model_type": "llama"}},
                norm_output={True: "feed_back", False: "head"}, own=("speculators_config",)),
    ConfigStyle("speculators-eagle", "config.json", nest="transformer_layer_config",
                outer=("fusion_bias", "layernorms", "transformer_layer_architecture"),   # the last: the source's
                fixed={"architectures": ["EagleSpeculator"], "speculators_model_type": "eagle",
                       "speculators_version": "0.1.0",
                       "speculators_config": {"algorithm": "eagle", "default_proposal_method": "greedy",
                                              "proposal_methods": [{"proposal_type": "greedy",
                                                                    "speculative_tokens": 5}],
                                              "verifier": {"name_or_path": None, "architectures": None}},
                       "transformer_layer_config": {"model_type": "llama"}},
                own=("speculators_config",)),
    ConfigStyle("mistral", "params.json",
                rename={"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
                        "n_kv_heads": "num_key_value_heads", "head_dim": "head_dim", "hidden_dim": "intermediate_size",
                        "norm_eps": "rms_norm_eps", "rope_theta": "rope_theta", "vocab_size": "vocab_size",
                        "max_seq_len": "max_position_embeddings"},
                keep=("quantization",)),   # Mistral's FP8 block ({qformat_weight, qscheme_act}), as written
)}

# EAGLE fields whose null means what their absence means (speculators writes target_hidden_size: null for the
# draft's own width): read and written as absent, since a flat config's readers test for the key and compute with
# its value (the EAGLE reference, SGLang and TensorRT-LLM build Linear(target_hidden_size * 3, ...))
NULL_ABSENT = ("target_hidden_size", "draft_vocab_size")
IDENTITY = ("model_type", "architectures")   # fixed by the hf and speculators styles for a plain Llama draft


def _stated(facts: Mapping[str, Any]) -> dict[str, Any]:
    """``facts`` without the null values of :data:`NULL_ABSENT` (what their absence says)."""
    return {k: v for k, v in facts.items() if not (v is None and k in NULL_ABSENT)}


def style_of(folder: str | Path, raw: Mapping[str, Any] | None = None) -> ConfigStyle:
    """The style a checkpoint folder's config is written in (from its files and keys, never `architectures`)."""
    folder = Path(folder)
    if not (folder / "config.json").is_file() and (folder / "params.json").is_file():
        return STYLES["mistral"]
    raw = raw if raw is not None else json.loads((folder / "config.json").read_text())
    if raw.get("speculators_model_type") == "eagle":
        return STYLES["speculators-eagle"]
    return STYLES["speculators"] if any(k in raw for k in ("speculators_config", "speculators_model_type",
                                                            "transformer_layer_config")) else STYLES["hf"]


def to_facts(raw: Mapping[str, Any], style: ConfigStyle) -> dict[str, Any]:
    """A config as written in ``style`` -> config facts (HF names, norm_output in spec terms)."""
    raw = dict(raw)
    inner = raw.pop(style.nest, None) if style.nest else None
    merged = {**(inner or {}), **raw}
    ids = dig(merged, f"eagle_config.{IDS}") or merged.get(IDS) or merged.get("target_layer_ids")
    fixed = {*style.fixed, *(style.fixed.get(style.nest) or {})}  # written as is, both levels: never facts
    facts = {style.rename.get(k, k): v for k, v in merged.items()
             if k not in fixed and k not in (IDS, "target_layer_ids", "eagle_config")}
    facts |= _identity(inner if style.nest else raw, (style.fixed.get(style.nest) or {}) if style.nest else style.fixed)
    rest = {k: v for k, v in (merged.get("eagle_config") or {}).items() if k != IDS}
    if rest:  # other eagle_config fields (NVIDIA ModelOpt flags) stay where they were
        facts["eagle_config"] = rest
    if ids:
        facts[IDS] = list(ids) if isinstance(ids, (list, tuple)) else ids   # as written: the fusion checks them
    facts = _stated(facts)
    value = facts.pop("norm_output", None)
    if isinstance(value, (bool, int, float, str)) and value in style.norm_output:  # a list or object: unhashable
        facts["norm_output"] = style.norm_output[value]
    return facts


def _identity(level: Mapping[str, Any], fixed: Mapping[str, Any]) -> dict[str, Any]:
    """The model_type / architectures a config level states where they are not the plain Llama ones the style fixes
    there (a draft whose model_type is the fixed one, or none, is a plain Llama draft: nothing kept)."""
    level = level if isinstance(level, Mapping) else {}
    model_type = level.get("model_type")
    if not isinstance(model_type, str) or model_type == fixed.get("model_type"):
        return {}
    return {k: level[k] for k in IDENTITY if k in level and level[k] != fixed.get(k)}


def from_facts(facts: Mapping[str, Any], style: ConfigStyle) -> dict[str, Any]:
    """Config facts -> a config written in ``style``; a norm_output the style cannot say is left out, and so are
    the null values of :data:`NULL_ABSENT`. ``facts`` is not changed (its nested objects are copied: the aux ids
    are put into eagle_config)."""
    facts = _stated(copy.deepcopy(dict(facts)))
    back = {v: k for k, v in style.rename.items()}
    out: dict[str, Any] = json.loads(json.dumps(style.fixed))
    ids = facts.pop(IDS, None)
    term = facts.pop("norm_output", None)
    if term is not None:
        values = [b for b, t in style.norm_output.items() if t == term]
        if values:  # else the style cannot say it: left out (convert reads the result back and compares)
            facts["norm_output"] = values[0]
    for key, value in facts.items():
        if style.rename and key not in back and key not in style.keep:
            continue  # a params.json holds only the keys it names
        name = back.get(key, key)
        if style.nest and key not in style.outer:
            out.setdefault(style.nest, {})[name] = value
        else:
            out[name] = value
    if ids is not None:
        put(out, style.ids_at, list(ids))
    return out
