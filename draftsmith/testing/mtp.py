"""DeepSeek-V3 MTP (NextN) layers written into a target's own files (FORMATS.md, "DeepSeek-V3 MTP layer").

Under ``model.layers.{L}.`` (L = the target's ``num_hidden_layers``): ``enorm``, ``hnorm``, ``eh_proj`` [H, 2H],
the decoder block's tensors directly under the same prefix (``self_attn.*``, ``mlp.*``, ``input_layernorm``,
``post_attention_layernorm``), ``shared_head.norm``, ``shared_head.head`` [V, H] and ``embed_tokens`` [V, H]
(full copies of the target's). The config gains ``num_nextn_predict_layers: 1``. The block follows the target's
attention: Llama names for a Llama target, DeepSeek-V3 MLA names when the config has MLA fields.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.testing import _dims, _llama_layer, _target_cfg
from draftsmith.testing.mla import mla_layer


def write_mtp(target: str | Path, *, seed: int = 11, std: float = 0.05, copy_head: bool = True,
              block_from: int | None = None) -> Path:
    """Add one MTP layer to the target folder (its model.safetensors and config.json) and return the folder.

    ``copy_head``: shared_head.head / embed_tokens are exact copies of the target's (as DeepSeek ships them);
    False writes independent random ones (a draft that disagrees more). ``block_from``: the decoder block is a copy
    of the tensors the files hold under ``model.layers.{block_from}.`` (an MoE layer's router and experts too; the
    MTP layer's own index, where the files hold it, keeps a block transformers wrote), else random dense."""
    folder, tc = Path(target), _target_cfg(target)
    H, nH, nKV, d, I = _dims(tc)
    L, V = tc["num_hidden_layers"], tc["vocab_size"]
    g = torch.Generator().manual_seed(seed)
    p = f"model.layers.{L}."
    src = load_file(str(folder / "model.safetensors"))
    if block_from is not None:
        q = f"model.layers.{block_from}."
        block = {p + n[len(q):]: t.clone() for n, t in src.items() if n.startswith(q)}
    elif tc.get("kv_lora_rank") is not None:
        block = mla_layer(p, H, nH, I, tc, H, g, std)
    else:
        block = _llama_layer(p, H, nH, nKV, d, I, H, g, std)
    head = src.get("lm_head.weight", src["model.embed_tokens.weight"])
    t = {f"{p}enorm.weight": 1 + torch.randn(H, generator=g) * 0.1,
         f"{p}hnorm.weight": 1 + torch.randn(H, generator=g) * 0.1,
         f"{p}eh_proj.weight": torch.randn(H, 2 * H, generator=g) * std,
         f"{p}shared_head.norm.weight": 1 + torch.randn(H, generator=g) * 0.1,
         f"{p}shared_head.head.weight": head.clone() if copy_head else torch.randn(V, H, generator=g) * std,
         f"{p}embed_tokens.weight": (src["model.embed_tokens.weight"].clone() if copy_head
                                     else torch.randn(V, H, generator=g) * std),
         **block}
    save_safetensors({**src, **t}, folder)
    (folder / "config.json").write_text(json.dumps({**tc, "num_nextn_predict_layers": 1}, indent=2))
    return folder


def mtp_reference(folder: str | Path, dtype: torch.dtype, decoder: type, norm: type):
    """(transformers' MtpLayer, its config) for the MTP layer :func:`write_mtp` wrote into ``folder``: its block is
    layer L of transformers' model of L + 1 layers over the same files (a folder beside ``folder``, written once),
    wrapped with the MTP layer's enorm, hnorm, eh_proj and shared_head.norm; ``decoder`` and ``norm``: the type's
    decoder layer and RMSNorm classes (DeepseekV3DecoderLayer, Glm4MoeDecoderLayer, ...)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_layers import MtpLayer

    folder = Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    L, deeper = cfg["num_hidden_layers"], folder.parent / f"{folder.name}-deeper"
    if not deeper.exists():
        deeper.mkdir()
        (deeper / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": L + 1,
                                                         "num_nextn_predict_layers": 0}))
        (deeper / "model.safetensors").symlink_to(folder / "model.safetensors")
    full = AutoModelForCausalLM.from_pretrained(deeper, dtype=dtype, experts_implementation="eager").eval()
    tcfg = AutoConfig.from_pretrained(folder)
    tcfg._attn_implementation = "eager"
    mtp = MtpLayer(tcfg, decoder, norm, layer_idx=L).to(dtype).eval()
    mtp.mtp_block = full.model.layers[L]
    ckpt, p = load_file(str(folder / "model.safetensors")), f"model.layers.{L}."
    own = {"enorm.weight": "enorm.weight", "hnorm.weight": "hnorm.weight", "eh_proj.weight": "eh_proj.weight",
           "post_norm.weight": "shared_head.norm.weight"}
    missing, _ = mtp.load_state_dict({k: ckpt[p + v].to(dtype) for k, v in own.items()}, strict=False)
    assert not [n for n in missing if not n.startswith("mtp_block.")]
    return mtp, tcfg
