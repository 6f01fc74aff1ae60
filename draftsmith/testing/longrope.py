"""A tiny Llama target read with a longrope rotary embedding (Phi-3's: short factors up to
``original_max_position_embeddings``, transformers' long factors past it) beside an EAGLE-3 draft of it."""
from __future__ import annotations

from pathlib import Path

from draftsmith.testing import edit_config, write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=4)


def write_longrope_pair(root: str | Path, original: int, **sizes) -> tuple[Path, Path]:
    """(target, draft) folders under ``root``: the target's rope longrope with ``original`` positions (its context
    stays larger), the draft tapping layers 0, 1, 2."""
    root, sizes = Path(root), {**SMALL, **sizes}
    target = write_target(root / "target", **sizes)
    draft = write_eagle3(root / "draft", target, aux_ids=[0, 1, 2])
    half = sizes["hidden_size"] // sizes["num_attention_heads"] // 2
    scaling = {"rope_type": "longrope", "short_factor": [1.0] * half, "long_factor": [4.0] * half,
               "original_max_position_embeddings": original}
    folder = edit_config(target, root / "longrope", drop=["rope_parameters"], rope_theta=10000.0,
                         rope_scaling=scaling)
    return folder, draft
