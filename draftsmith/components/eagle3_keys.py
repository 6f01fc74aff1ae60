"""How an EAGLE-3 draft's config keys are read (``eagle_config.<key>`` over the top level's), and the keys of
NVIDIA Model-Optimizer's exports and others the eagle3 fusion does not compute or read: refused by name
(:func:`unbuilt_problems`) or said (:func:`config_notes`). components/eagle3_config.py resolves the fusion's facts
from them."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from draftsmith.errors import Problem, short

LAST_NORM = "use_last_layernorm"   # NVIDIA Model-Optimizer's final norm before the head (norm_output head or none)


def nested(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The config's ``eagle_config`` mapping (NVIDIA Model-Optimizer's nesting), else an empty one."""
    inner = cfg.get("eagle_config")
    return inner if isinstance(inner, Mapping) else {}


def config_value(cfg: Mapping[str, Any], key: str) -> Any:
    """``eagle_config.<key>`` wins over the top-level ``<key>`` (NVIDIA ModelOpt drafts nest their fields)."""
    inner = nested(cfg)
    return inner[key] if inner.get(key) is not None else cfg.get(key)


def where(cfg: Mapping[str, Any], key: str) -> str:
    """``key`` as :func:`config_value` read it: ``eagle_config.<key>`` where that one is stated."""
    return f"eagle_config.{key}" if nested(cfg).get(key) is not None else key


AUX_FLAG = "use_aux_hidden_state"   # NVIDIA Model-Optimizer's, under eagle_config (vLLM reads it there)
FIRST_NORM, MTP_NORM, PARALLEL = "use_input_layernorm_in_first_layer", "use_mtp_layernorm", "parallel_draft_step"
# Model-Optimizer's eagle_config keys that are read (honoured, or refused where the fusion does not compute them);
# has_lm_head is left to the tensors: an lm_head.weight held is the draft's head (its HF export writes the target's
# there when false), one missing is said by the load
MODELOPT_KEYS = (AUX_FLAG, LAST_NORM, FIRST_NORM, MTP_NORM, PARALLEL, "has_lm_head")
# the draft config's "bias": what the engines read it as in an EAGLE-3 draft, which draftsmith's does not
BIAS_NOTE = ('the draft config says "bias": {found}, which an EAGLE-3 draft here does not read: fc and o_proj are '
             "built without a bias, as EAGLE's and SpecForge's trainers build them whatever the key says (vLLM reads "
             "it as an o_proj bias, SGLang as an o_proj and an fc bias, and leave them unset where the checkpoint "
             "holds none); a draft trained with an o_proj bias states draft.attention.o_bias: true in its spec, and "
             "an fc.bias is refused (the eagle3 fusion has none)")


def aux_problems(cfg: Mapping[str, Any]) -> list[Problem]:
    """A draft config whose ``eagle_config.use_aux_hidden_state`` is not true: such a draft is fed the target's last
    hidden state with no fc (vLLM reads the key there, skips fc.* and taps no layer), which the eagle3 fusion does
    not compute; run with fc over aux states, it would decode from inputs it was never trained on. The key at the
    top level no engine reads (vLLM runs such a draft with fc, as draftsmith does): :func:`config_notes` says it."""
    found = nested(cfg).get(AUX_FLAG)
    if found is None or found is True:
        return []
    return [Problem(f"draft config eagle_config.{AUX_FLAG}",
                    "asks for a draft fed the target's last hidden state with no fc (vLLM skips fc.* and taps no "
                    "layer), which the eagle3 fusion does not compute: it always feeds fc the aux states",
                    found=found, allowed="true, or the key absent (a draft trained on aux hidden states through fc)")]


# Model-Optimizer's eagle_config flags for a draft the fusion does not compute: (key, the values it computes, what
# another value asks for, what is allowed). Its defaults (true, false, 1) are what the fusion computes.
UNBUILT = (
    (FIRST_NORM, (True,), "asks for a first layer with no norm on the fused hidden state (Megatron-LM's EAGLE builds "
                          "that input_layernorm as an identity and exports no hidden_norm), which the eagle3 fusion "
                          "does not compute: its first layer always norms it with hidden_norm",
     "true, or the key absent (layer 0 norms the fused hidden state with hidden_norm)"),
    (MTP_NORM, (False,), "asks for MTP-style norms of the embedding and the hidden state (enorm, hnorm) before the "
                         "layers, which the eagle3 fusion does not compute (Model-Optimizer exports none for an "
                         "EAGLE-3 draft, and its HF trainer does not read the flag: a draft trained there is the "
                         "plain one, whose config may say false)",
     "false, or the key absent"),
    (PARALLEL, (1,), "asks for parallel draft heads (parallel_draft_heads.*, step - 1 of them) that predict further "
                     "tokens from one draft step, which draftsmith does not compute",
     "1, or the key absent (one token per draft step)"))


def unbuilt_problems(cfg: Mapping[str, Any]) -> list[Problem]:
    """:func:`aux_problems`, and every Model-Optimizer flag (:data:`UNBUILT`) whose value asks for a draft the eagle3
    fusion does not compute (loaded anyway, it would decode silently wrong: a norm it applies that the draft never
    had, norms it lacks, heads it never runs)."""
    out = aux_problems(cfg)
    for key, computed, asks, allowed in UNBUILT:
        found = config_value(cfg, key)
        if found is not None and not any(type(found) is type(v) and found == v for v in computed):
            out.append(Problem(f"draft config {where(cfg, key)}", asks, found=found, allowed=allowed))
    return out


def config_notes(cfg: Mapping[str, Any]) -> list[str]:
    """What the draft config states that the eagle3 fusion does not read, one line each (a true ``bias``; a top-level
    ``use_aux_hidden_state`` not true)."""
    def said(value: Any) -> str:
        return str(value).lower() if isinstance(value, bool) else short(value)
    notes = []
    if (found := cfg.get("bias")) not in (None, False):
        notes.append(BIAS_NOTE.format(found=said(found)))
    if nested(cfg).get(AUX_FLAG) is None and (top := cfg.get(AUX_FLAG)) not in (None, True):
        notes.append(f"the draft config says {AUX_FLAG}: {said(top)} at its top level, where no engine reads it (vLLM "
                     "reads eagle_config's, and without it runs the draft with fc over the aux states, as here)")
    return notes


__all__ = ["AUX_FLAG", "LAST_NORM", "MODELOPT_KEYS", "aux_problems", "config_notes", "config_value", "nested",
           "unbuilt_problems", "where"]
