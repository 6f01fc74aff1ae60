"""A tiny Mistral-native GQA EAGLE draft (FORMATS.md, "Mistral-native GQA EAGLE"): Mistral's own tensor names and
``params.json``, two layers, a final norm, the fusion linear ``eagle_linear`` [H, 2H] over cat([embed, hidden]),
weights in ``consolidated.safetensors``, q/k rows in the interleaved (Mistral) rotary order."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.testing import _dims, _llama_layer, _target_cfg

# canonical (Hugging Face) name inside a layer -> Mistral's own
NATIVE = {"self_attn.q_proj": "attention.wq", "self_attn.k_proj": "attention.wk", "self_attn.v_proj": "attention.wv",
          "self_attn.o_proj": "attention.wo", "input_layernorm": "attention_norm",
          "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "feed_forward.w1",
          "mlp.down_proj": "feed_forward.w2", "mlp.up_proj": "feed_forward.w3"}


def to_native(name: str) -> str:
    for hf, native in NATIVE.items():
        if f".{hf}." in name:
            return name.replace(f".{hf}.", f".{native}.")
    return name


def write_mistral_eagle(folder: str | Path, target: str | Path, *, layers: int = 2, seed: int = 11,
                        std: float = 0.05) -> Path:
    folder, tc = Path(folder), _target_cfg(target)
    H, nH, nKV, d, I = _dims(tc)
    g = torch.Generator().manual_seed(seed)
    t = {"eagle_linear.weight": torch.randn(H, 2 * H, generator=g) * std}
    for i in range(layers):
        t |= {to_native(n): v for n, v in _llama_layer(f"layers.{i}.", H, nH, nKV, d, I, H, g, std).items()}
    t["norm.weight"] = 1 + torch.randn(H, generator=g) * 0.1
    theta = tc.get("rope_theta") or (tc.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    params = {"dim": H, "n_layers": layers, "head_dim": d, "hidden_dim": I, "n_heads": nH, "n_kv_heads": nKV,
              "norm_eps": tc.get("rms_norm_eps", 1e-5), "rope_theta": theta, "vocab_size": tc["vocab_size"],
              "max_seq_len": tc.get("max_position_embeddings", 4096)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.json").write_text(json.dumps(params, indent=2))
    save_safetensors(t, folder, "consolidated.safetensors")
    return folder
