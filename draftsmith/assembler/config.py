"""Reading checkpoint configs. Targets go through transformers' AutoConfig (no remote code); drafts through a
plain ``LlamaConfig`` so missing keys take transformers' Llama defaults, exactly as the drafts were trained."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers import AutoConfig, LlamaConfig, PretrainedConfig

MLA_KEYS = ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "kv_lora_rank", "v_head_dim")
RECURRENT_LAYER_TYPES = ("mamba", "linear_attention", "mamba2", "recurrent")


def read_config(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no config.json (a checkpoint folder needs config.json + weights)")
    return json.loads(path.read_text())


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


def draft_hf_config(raw: Mapping[str, Any]) -> PretrainedConfig:
    keep = {k: v for k, v in flatten_draft_config(raw).items() if k not in ("architectures", "model_type")}
    return LlamaConfig(**keep)


def target_hf_config(folder: str | Path) -> PretrainedConfig:
    return AutoConfig.from_pretrained(str(folder), trust_remote_code=False)


def text_config(cfg: PretrainedConfig) -> PretrainedConfig:
    getter = getattr(cfg, "get_text_config", None)
    return getter() if getter else cfg


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
    if gen.is_file():
        sources.append(json.loads(gen.read_text()).get("eos_token_id"))
    for v in sources:
        ids.update([v] if isinstance(v, int) else (v or []))
    return ids
