"""The scale benchmark's random-weight checkpoints: a Llama target in the Hugging Face layout and an EAGLE-3 draft
in the ``midlayer.*`` layout with a reduced vocabulary, in the shapes of :data:`SHAPES`, written once and reused."""
from __future__ import annotations

import contextlib
import errno
import json
from pathlib import Path

import torch

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.errors import DraftsmithError, short_text

SHAPES = {  # Llama-3.2-1B, Llama-3.1-8B; tiny runs on a CPU in seconds
    "tiny": dict(hidden_size=256, intermediate_size=768, num_attention_heads=8, num_key_value_heads=2,
                 num_hidden_layers=8, vocab_size=8192, draft_vocab=2048, tie=False),
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=32, num_key_value_heads=8,
               num_hidden_layers=16, vocab_size=128256, draft_vocab=32000, tie=True),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
               num_hidden_layers=32, vocab_size=128256, draft_vocab=32000, tie=False),
}


def write_llama(folder: Path, shape: dict, device: str, seed: int = 0, shard_bytes: int = 2 << 30) -> Path:
    """A random Llama target (bf16, sharded safetensors + index, HF names); kept if already written."""
    from transformers import LlamaConfig

    if (folder / "config.json").exists():
        if other := _other_sizes(folder / "config.json", shape):
            raise WriteFailed(f"{short_text(folder, 300)} holds a target of other sizes than the benchmark's "
                              f"({other}): give --checkpoints another folder, or remove that one to have it written "
                              "anew")
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    H, nH = shape["hidden_size"], shape["num_attention_heads"]
    nKV, inter, L, V = shape["num_key_value_heads"], shape["intermediate_size"], shape["num_hidden_layers"], \
        shape["vocab_size"]
    d = H // nH
    g = torch.Generator(device).manual_seed(seed)

    def w(*s, std=0.02):
        return (torch.randn(*s, generator=g, device=device) * std).to(torch.bfloat16).cpu()

    def norm():
        return (1 + torch.randn(H, generator=g, device=device) * 0.01).to(torch.bfloat16).cpu()

    names = [("model.embed_tokens.weight", lambda: w(V, H))]
    for i in range(L):
        p = f"model.layers.{i}."
        names += [(p + "self_attn.q_proj.weight", lambda: w(nH * d, H)),
                  (p + "self_attn.k_proj.weight", lambda: w(nKV * d, H)),
                  (p + "self_attn.v_proj.weight", lambda: w(nKV * d, H)),
                  (p + "self_attn.o_proj.weight", lambda: w(H, nH * d)),
                  (p + "mlp.gate_proj.weight", lambda: w(inter, H)), (p + "mlp.up_proj.weight", lambda: w(inter, H)),
                  (p + "mlp.down_proj.weight", lambda: w(H, inter)), (p + "input_layernorm.weight", norm),
                  (p + "post_attention_layernorm.weight", norm)]
    names += [("model.norm.weight", norm)] + ([] if shape["tie"] else [("lm_head.weight", lambda: w(V, H))])
    weight_map, shard, size, n = {}, {}, 0, 0

    def flush():
        nonlocal shard, size, n
        if shard:
            n += 1
            save_safetensors(shard, folder, f"model-{n:05d}.safetensors")   # whole or not at all, the umask's mode
            weight_map.update({k: f"model-{n:05d}.safetensors" for k in shard})
            shard, size = {}, 0

    for name, make in names:
        t = make()
        shard[name] = t
        size += t.numel() * t.element_size()
        if size >= shard_bytes:
            flush()
    flush()
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    LlamaConfig(hidden_size=H, intermediate_size=inter, num_attention_heads=nH, num_key_value_heads=nKV,
                num_hidden_layers=L, vocab_size=V, head_dim=d, max_position_embeddings=8192, rope_theta=500000.0,
                rms_norm_eps=1e-5, tie_word_embeddings=shape["tie"], bos_token_id=0, eos_token_id=1,
                dtype="bfloat16").save_pretrained(folder)
    return folder


def _other_sizes(config: Path, shape: dict) -> str:
    """How a reused target's config.json differs from the shape's sizes ('' where it does not)."""
    try:
        held = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"its config.json cannot be read: {short_text(e, 200)}"
    held = held if isinstance(held, dict) else {}
    return ", ".join(f"{k} {held.get(k)!r}, not {v}" for k, v in shape.items()
                     if k.endswith(("_size", "_heads", "_layers")) and held.get(k) != v)


def write_pair(root: Path, name: str, device: str) -> tuple[Path, Path]:
    """The shape's target and draft under ``root``, written where a previous run did not finish them (each folder's
    config.json is written last). A write that fails (a full disk: neither safetensors' error nor a failed flush
    names the file) is a :class:`WriteFailed` naming the folder, whose config.json is removed (one cut short would
    mark it written); a rerun writes that folder again."""
    from safetensors import SafetensorError

    from draftsmith.testing import write_eagle3

    shape = SHAPES[name]
    target, draft = root / f"{name}-target", root / f"{name}-draft"
    folder = target
    try:
        write_llama(target, shape, device)
        folder = draft
        if not (draft / "config.json").exists():
            write_eagle3(draft, target, draft_vocab=shape["draft_vocab"], std=0.02)
    except WriteFailed:   # a folder it does not write (another target's): left as it is
        raise
    except (OSError, SafetensorError) as e:
        with contextlib.suppress(OSError):   # a config cut short would mark the folder written
            (folder / "config.json").unlink(missing_ok=True)
        why = getattr(e, "strerror", None) or short_text(" ".join(str(e).split()), 200)
        full = getattr(e, "errno", None) == errno.ENOSPC or "os error 28" in str(e) or "No space left" in str(e)
        fix = ("free space (the 8b pair takes ~18 GB, the 1b ~3 GB), or give --checkpoints another folder" if full
               else "give --checkpoints a folder that can be written")
        raise WriteFailed(f"cannot write the {name} benchmark checkpoint into {short_text(folder, 300)}: {why}; "
                          f"{fix}, and run again: a folder without its config.json is written anew") from None
    return target, draft


class WriteFailed(DraftsmithError, OSError):
    """The scale benchmark could not write its random-weight checkpoints (said as a message, not a traceback)."""
