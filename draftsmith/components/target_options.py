"""Target records' parts beyond Llama's, as data (:class:`draftsmith.components.targets.TargetArch`'s fields): Gemma's
layer (:data:`GEMMA`), and the refusal of a config value those records name but draftsmith does not compute
(:func:`options_check`)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from draftsmith.components.target_refusals import UNCOMPUTED, refused
from draftsmith.errors import short
from draftsmith.values import is_number

# the file's names of Gemma's layer norms -> the model's (components.layers.DecoderLayer): its attention's output norm,
# its norm before the MLP (Llama's post_attention_layernorm slot), its MLP's output norm
GEMMA_NAMES = (("post_attention_layernorm", "attn_output_norm"),
               ("pre_feedforward_layernorm", "post_attention_layernorm"),
               ("post_feedforward_layernorm", "mlp_output_norm"))
# Gemma's layers (transformers' Gemma-2 / Gemma-3): RMSNorms of weights stored as offsets from 1 (x * (1 + w) in
# float32), the embedding times sqrt(hidden_size), the attention's and the MLP's outputs normed before their residual
# adds, GeGLU MLPs (gelu_pytorch_tanh, hidden_activation), no MLP bias, the scores scaled by query_pre_attn_scalar
# ** -0.5, the logits capped by final_logit_softcapping where set; bidirectional attention refused
GEMMA = {"norm_params": (("offset", 1.0),), "layer_params": (("post_norms", True),),
         "mlp_params": (("activation", "gelu_tanh"),), "mlp_bias": False, "embed_scale": True, "names": GEMMA_NAMES,
         "attention_params": (("scale_key", "query_pre_attn_scalar"),), "logit_cap": "final_logit_softcapping",
         "options": (("hidden_activation", ("gelu_pytorch_tanh",)), ("use_bidirectional_attention", (False,)))}
# Gemma-1's layers (transformers' Gemma: Gemma 2B / 7B, CodeGemma): GEMMA's norms, embedding scale and GeGLU MLPs,
# but Llama's two norms a layer, head_dim ** -0.5, no logit cap, q/k/v/o biases by attention_bias; its MLP's
# activation is hidden_act (GemmaConfig reads the Hub's legacy "gelu" as gelu_pytorch_tanh; a hidden_activation key
# is unread)
GEMMA1 = {"norm_params": GEMMA["norm_params"], "mlp_params": GEMMA["mlp_params"], "mlp_bias": False,
          "embed_scale": True,
          "options": (("hidden_act", ("gelu_pytorch_tanh",)), ("use_bidirectional_attention", (False,)))}
# Gemma-2's attention: GEMMA's, its scores capped by attn_logit_softcapping (components.softcap)
CAPPED_SCORES = {"attention_params": (*GEMMA["attention_params"], ("softcap_key", "attn_logit_softcapping"))}


def options_check(cfg, options: Sequence[tuple[str, tuple[Any, ...]]], numbers: Iterable[str | None] = ()) -> None:
    """Refuse a config whose ``options`` key holds a value other than those listed (the key absent or null: its
    model's default, computed), or whose ``numbers`` keys (a record's scale and cap keys) hold no positive number
    (null: none, where the key is a cap)."""
    for key, allowed in options:
        if (found := getattr(cfg, key, None)) is not None and found not in allowed:
            raise refused(cfg, f"{key}={short(found)}, which draftsmith does not compute; allowed: "
                               f"{', '.join(map(repr, allowed))} (or the key absent). {UNCOMPUTED}")
    for key in filter(None, numbers):
        found = getattr(cfg, key, None)
        if found is not None and not (is_number(found) and found > 0):
            raise refused(cfg, f"{key}={short(found)} is no scale draftsmith can compute; allowed: a positive "
                               f"number. {UNCOMPUTED}")


__all__ = ["CAPPED_SCORES", "GEMMA", "GEMMA1", "GEMMA_NAMES", "options_check"]
