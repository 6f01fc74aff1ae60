"""Tiny MLA EAGLE drafts in their published layouts (FORMATS.md, "MLA EAGLE").

The family (Mistral Small 4 / Mistral Large 3 EAGLE; SGLang and vLLM ``MistralLarge3ForCausalLMEagle``, model_type
deepseek_v3): ``fc`` over cat([embed(x_{t+1}), h_t]) (2H -> H, no bias), DeepSeek-V2/V3 decoder layers with
latent attention and a dense SwiGLU MLP (input_layernorm in every layer), a final ``norm`` whose output is fed
back; embed and head come from the target. Two namings:

- ``deepseek``: Hugging Face / DeepSeek-V3 names under ``model.`` (``model.fc``, ``model.layers.N.self_attn.
  q_a_proj`` ..., ``model.norm``), as the engines hold them after their remap;
- ``mistral``: Mistral's own (``eagle_linear``, ``layers.N.attention.wq_a`` / ``q_a_norm`` / ``wq_b`` /
  ``wkv_a_with_mqa`` / ``kv_a_norm`` / ``wkv_b`` / ``wo``, ``attention_norm``, ``ffn_norm``,
  ``feed_forward.w1/w2/w3``, ``norm``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from draftsmith.testing import _dims, _target_cfg, _write

MLA_SIZES = dict(q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=6, v_head_dim=10)

# DeepSeek-V3 name (after ``self_attn.`` / in the layer) -> Mistral-native name
MISTRAL_NAMES = {
    "self_attn.q_proj": "attention.wq", "self_attn.q_a_proj": "attention.wq_a",
    "self_attn.q_a_layernorm": "attention.q_a_norm", "self_attn.q_b_proj": "attention.wq_b",
    "self_attn.kv_a_proj_with_mqa": "attention.wkv_a_with_mqa", "self_attn.kv_a_layernorm": "attention.kv_a_norm",
    "self_attn.kv_b_proj": "attention.wkv_b", "self_attn.o_proj": "attention.wo",
    "input_layernorm": "attention_norm", "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "feed_forward.w1", "mlp.down_proj": "feed_forward.w2", "mlp.up_proj": "feed_forward.w3",
}


def mla_layer(prefix: str, H: int, nH: int, I: int, m: dict[str, Any], in_width: int, g: torch.Generator,
              std: float) -> dict[str, torch.Tensor]:
    """One DeepSeek-V3 decoder layer (MLA + dense SwiGLU) under ``prefix`` in DeepSeek names."""
    def w(*shape):
        return torch.randn(*shape, generator=g) * std

    def norm(n):
        return 1 + torch.randn(n, generator=g) * 0.1

    qk = m["qk_nope_head_dim"] + m["qk_rope_head_dim"]
    a = f"{prefix}self_attn."
    t = {}
    if m.get("q_lora_rank"):
        t |= {f"{a}q_a_proj.weight": w(m["q_lora_rank"], in_width), f"{a}q_a_layernorm.weight": norm(m["q_lora_rank"]),
              f"{a}q_b_proj.weight": w(nH * qk, m["q_lora_rank"])}
    else:
        t[f"{a}q_proj.weight"] = w(nH * qk, in_width)
    t |= {f"{a}kv_a_proj_with_mqa.weight": w(m["kv_lora_rank"] + m["qk_rope_head_dim"], in_width),
          f"{a}kv_a_layernorm.weight": norm(m["kv_lora_rank"]),
          f"{a}kv_b_proj.weight": w(nH * (m["qk_nope_head_dim"] + m["v_head_dim"]), m["kv_lora_rank"]),
          f"{a}o_proj.weight": w(H, nH * m["v_head_dim"]),
          f"{prefix}mlp.gate_proj.weight": w(I, H), f"{prefix}mlp.up_proj.weight": w(I, H),
          f"{prefix}mlp.down_proj.weight": w(H, I),
          f"{prefix}input_layernorm.weight": norm(H), f"{prefix}post_attention_layernorm.weight": norm(H)}
    return t


def mla_config(tc: dict[str, Any], layers: int, **mla: Any) -> dict[str, Any]:
    """A deepseek_v3 draft config.json: the target's sizes, the MLA fields, interleaved rope."""
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size", "rms_norm_eps",
            "max_position_embeddings")
    theta = tc.get("rope_theta") or (tc.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    return {"architectures": ["MistralLarge3ForCausalLMEagle"], "model_type": "deepseek_v3",
            **{k: tc[k] for k in keys if k in tc}, "num_key_value_heads": tc["num_attention_heads"],
            "num_hidden_layers": layers, "first_k_dense_replace": layers, "rope_theta": theta,
            "rope_interleave": True, **MLA_SIZES, **mla}


def to_mistral(name: str) -> str:
    """A DeepSeek-named draft tensor (``model.`` prefix) in Mistral's own naming."""
    name = name.removeprefix("model.")
    if name.startswith("fc."):
        return "eagle_linear." + name.removeprefix("fc.")
    for ds_name, native in MISTRAL_NAMES.items():
        if f".{ds_name}." in name:
            return name.replace(f".{ds_name}.", f".{native}.")
    return name


def write_mla_eagle(folder: str | Path, target: str | Path, *, layout: str = "deepseek", layers: int = 2,
                    seed: int = 7, std: float = 0.05, embed: bool = True, **mla: Any) -> Path:
    """An MLA EAGLE draft for ``target`` (any Llama-family folder); ``layout`` is 'deepseek' or 'mistral';
    ``mla`` overrides the MLA sizes (``q_lora_rank=None`` writes ``q_proj`` / ``wq``)."""
    if layout not in ("deepseek", "mistral"):
        raise ValueError(f"layout must be 'deepseek' or 'mistral', got {layout!r}")
    folder, tc = Path(folder), _target_cfg(target)
    H, nH, _, _, I = _dims(tc)
    cfg = mla_config(tc, layers, **mla)
    g = torch.Generator().manual_seed(seed)
    t = {"model.fc.weight": torch.randn(H, 2 * H, generator=g) * std}
    for i in range(layers):
        t |= mla_layer(f"model.layers.{i}.", H, nH, I, cfg, H, g, std)
    t["model.norm.weight"] = 1 + torch.randn(H, generator=g) * 0.1
    if embed and layout == "deepseek":  # the HF-format draft carries a copy of the target's embedding
        t["model.embed_tokens.weight"] = torch.randn(tc["vocab_size"], H, generator=g) * std
    if layout == "mistral":  # no tok_embeddings / output: both come from the target
        t = {to_mistral(n): v for n, v in t.items()}
    return _write(folder, cfg, t, False)
