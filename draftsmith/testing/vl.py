"""Tiny Qwen2-VL / Qwen2.5-VL / Qwen3-VL checkpoints (a text model beside a vision tower), written by transformers'
own ``save_pretrained`` (float32, random norms and biases as :func:`draftsmith.testing.write_target`'s), in either
name layout: ``hub`` (the Hub's Qwen2-VL / Qwen2.5-VL files: ``model.layers.*``, ``visual.*``, ``lm_head``) or
``language_model`` (transformers 5's and the Hub's Qwen3-VL: ``model.language_model.layers.*``, ``model.visual.*``);
``flat``: the text model's keys at the top of config.json, as the Hub's Qwen2.5-VL config.json writes them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.testing import SIZES

VISION = {  # the smallest vision towers transformers builds (their sizes are no concern of the text model)
    "qwen2_vl": dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=1),
    "qwen2_5_vl": dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=64),
    "qwen3_vl": dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=64,
                     deepstack_visual_indexes=[0], num_position_embeddings=16),
}
ROPE = {  # a head of 64 / 4 = 16 turns 8 frequencies: mrope sections of 8 (Qwen3-VL's interleaved, as the Hub's)
    "qwen2_vl": {"rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}},
    "qwen2_5_vl": {"rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}},
    "qwen3_vl": {"head_dim": 16, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5,
                                                     "mrope_section": [4, 2, 2], "mrope_interleaved": True}},
}


def to_layout(name: str, layout: str) -> str:
    """A tensor name of either layout in ``layout``'s."""
    hub = name.replace("model.language_model.", "model.", 1) if name.startswith("model.language_model.") else \
        name.replace("model.visual.", "visual.", 1) if name.startswith("model.visual.") else name
    if layout == "hub":
        return hub
    return ("model.language_model." + hub[len("model."):] if hub.startswith("model.") else
            "model." + hub if hub.startswith("visual.") else hub)


def write_vl_target(folder: str | Path, model_type: str = "qwen2_5_vl", *, layout: str = "hub", flat: bool = False,
                    seed: int = 0, init_std: float = 0.15, tie: bool = False, **text: Any) -> Path:
    """``model_type``'s model of two text layers over :data:`~draftsmith.testing.SIZES` (``text`` overrides its
    text config's keys) saved by transformers, its tensors renamed to ``layout``."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForImageTextToText

    folder = Path(folder)
    text_cfg = {**SIZES, "num_hidden_layers": 2, "initializer_range": init_std, "bos_token_id": 0,
                "eos_token_id": 1, **ROPE[model_type], **text}
    cfg = AutoConfig.for_model(model_type, text_config=text_cfg, vision_config=VISION[model_type],
                               tie_word_embeddings=tie)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForImageTextToText.from_config(cfg)
        with torch.no_grad():
            for p in model.parameters():
                if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                    p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder)
    file = folder / "model.safetensors"
    save_safetensors({to_layout(k, layout): v for k, v in load_file(file).items()}, folder, metadata={"format": "pt"})
    if flat:
        written = json.loads((folder / "config.json").read_text())
        inner = {k: v for k, v in written.pop("text_config").items() if k != "model_type"}
        (folder / "config.json").write_text(json.dumps({**inner, **written}, indent=2))
    return folder
