"""The built-in layout detector: the family comes from tensor names and config fields, never `architectures`."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from draftsmith.hooks import LayoutMatch


def detect_builtin_layout(config: Mapping[str, Any], tensor_names: Sequence[str]) -> LayoutMatch | None:
    names = set(tensor_names)
    if any(n.startswith("midlayer.") for n in names) and "fc.weight" in names:
        notes = ["norm_before_residual: false (the reference's; the weights cannot show it)"]
        layers = config.get("num_hidden_layers")
        if layers not in (None, 1):
            notes.append(f"config says num_hidden_layers={layers}; the midlayer layout has exactly 1 layer")
        return LayoutMatch("eagle3-llama", "midlayer.* tensors with hidden_norm and fc (EAGLE-3, yuhuili/lmsys)",
                           tuple(notes))
    if "fc.weight" in names and "layers.0.post_attention_layernorm.weight" in names \
            and "layers.0.input_layernorm.weight" not in names and "layers.0.hidden_norm.weight" not in names:
        bias = "fc.bias" in names
        declared = bool(config.get("bias", True))  # a missing key means a bias (the reference's default)
        notes = [] if declared == bias else \
            [f"config bias={config.get('bias', 'missing')} but fc.bias is {'present' if bias else 'absent'}"]
        return LayoutMatch("eagle1-llama", "fc over [embed; hidden] and layer 0 without input_layernorm "
                                           "(EAGLE-1, yuhuili)", tuple(notes))
    return None
