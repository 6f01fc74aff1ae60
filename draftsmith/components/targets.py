"""Target architectures, one record per Hugging Face ``model_type``: what differs between targets is data here
(q/k/v bias, per-head q/k norms, latent attention, sliding windows, which layers are mixture-of-experts and how
their router scores, fused q/k/v and gate/up tensors, a partial rotary factor), never an if on a family name in the
model code. Every type listed is checked against transformers' logits (tests/assembler/test_parity.py,
tests/assembler/test_targets_zoo.py, tests/assembler/test_moe_targets.py, tests/assembler/test_vl_targets.py,
tests/assembler/test_phi3_target.py, tests/assembler/test_gemma_targets.py,
tests/assembler/test_glm4_moe_target.py, tests/assembler/test_gemma1_target.py,
tests/assembler/test_smollm3_target.py); a config this code would misread is refused by ``check`` with the reason.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from draftsmith.components.params import MoEParams, StackedMoEParams
from draftsmith.components.target_options import CAPPED_SCORES, GEMMA, GEMMA1, options_check
from draftsmith.components.target_refusals import (LAYERS_FIX, UNCOMPUTED, UnsupportedTarget, config_path,
                                                    layer_types_check, moe_check, moe_refusal, moe_sizes,
                                                    moe_types, mrope_check, mrope_covers, refused,
                                                    rope_layers_check, rotary_check, text_type_check)

if TYPE_CHECKING:
    from torch import nn


# How transformers' model of a type reads the config's ``sliding_window`` (its modeling code, per model_type):
# "ignored" (Llama, DeepSeek-V3: the key may be there and changes nothing), "every_layer" (Mistral, Phi-3: every
# layer, ``layer_types`` ignored), "layer_types" (Qwen2/3: the layers ``layer_types`` marks "sliding_attention"),
# "config" (``layer_types`` when the config has it, else every layer: the rule for a type that states none).
WindowRule = Literal["ignored", "every_layer", "layer_types", "config"]


class TargetArch(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    qkv_bias: bool | None = None       # None: the config's `attention_bias`
    o_bias: bool | None = None         # None: the config's `attention_bias` (Qwen2: biases on q/k/v, none on o)
    mlp_bias: bool | None = None       # None: the config's `mlp_bias` (Llama's key; the other types' MLPs have none)
    qk_norm: bool | Literal["config"] = False   # RMSNorm over each head of q and k (Qwen3); config: where the
    # config's use_qk_norm is true (GLM-4.5's key: the gqa attention's qk_norm: config)
    recurrent: bool = False            # has mamba / linear-attention layers (rules out spec v2)
    attention: str = "gqa"             # registered attention component of every layer
    attention_params: tuple[tuple[str, Any], ...] = ()   # more of its params, (key, value) pairs (DeepSeek-V3: its
    # latent norms' fixed eps)
    moe: tuple[tuple[str, Any], ...] = ()   # params of its mixture-of-experts layers' moe component (() for none)
    moe_kind: str = "sparse"           # registered moe component of its mixture-of-experts layers (as ``attention``)
    moe_from: str | None = None        # config key: the layers from its value on are MoE (DeepSeek-V3)
    moe_step: str | None = None        # config key: every step-th layer is MoE (Qwen3-MoE's decoder_sparse_step) ...
    moe_dense: str | None = None       # ... unless this key's list names it (mlp_only_layers)
    moe_types: str | None = None       # config key: a list naming each layer's MLP, "sparse" the MoE ones
    # (GLM-4.7-Flash's mlp_layer_types); a layer past the list (an MTP layer) is MoE
    moe_experts: str | None = None     # config key of the experts count moe_step's rule reads (none there: no MoE
    # layer); None: the moe params' experts_key (MoEParams' default, num_experts, for another moe_kind than sparse)
    moe_options: tuple[tuple[str, tuple[Any, ...]], ...] = ()   # (config key, the values computed): others refused
    sliding_window: WindowRule = "config"   # which layers the config's sliding_window applies to (above)
    # the checkpoint's module names under each layer that are not the model's: (file's, model's), ``{e}`` an expert's
    # number (Mixtral's block_sparse_moe.experts.{e}.w1 is the model's mlp.experts.{e}.gate_proj); see name_rules
    names: tuple[tuple[str, str], ...] = ()
    # a multimodal type's text model (Qwen2-VL): its files' name prefixes (file's, model's), those of the tensors it
    # does not read (the vision tower: not loaded), and its multimodal rope's mrope_section where the config has none
    prefixes: tuple[tuple[str, str], ...] = ()
    skipped: tuple[str, ...] = ()
    mrope: tuple[int, ...] = ()   # (): 1-D rope; else text-only positions rotate as 1-D rope (mrope_check)
    # the checkpoint's modules under each layer that stack several of the model's by rows: (file's, (model's, in row
    # order)) (Phi-3's self_attn.qkv_proj holds q_proj | k_proj | v_proj); read by split rules, see name_rules
    fused: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # its rope reads the config's partial_rotary_factor (the first part of each head rotates: Phi-3's) where Llama's
    # rotates whole heads whatever the key says: the gqa attention's partial_rotary
    partial_rotary: bool = False
    # more params of its layers' parts: the layer (Gemma: post_norms), the MLP (Gemma: activation gelu_tanh) and
    # every norm (Gemma: offset 1.0, the weights stored as offsets from 1), (key, value) pairs as attention_params
    layer_params: tuple[tuple[str, Any], ...] = ()
    mlp_params: tuple[tuple[str, Any], ...] = ()
    norm_params: tuple[tuple[str, Any], ...] = ()
    embed_scale: bool = False          # the token embedding times sqrt(hidden_size), in the model's dtype (Gemma)
    logit_cap: str | None = None       # config key of the logits' tanh cap (final_logit_softcapping; null: none)
    options: tuple[tuple[str, tuple[Any, ...]], ...] = ()   # (config key, the values computed): others refused
    # a model_type transformers has no config class for (Kimi-K2's kimi_k2, read by remote code draftsmith never
    # runs): the transformers type its config.json is read as, whose computation the type's is (read_target_config)
    config_as: str | None = None
    # a multimodal type whose text_config may be any transformers type (Kimi-K2.5's): the one its layers compute
    text_type: str | None = None

    def window(self, cfg, idx: int) -> int | None:
        """Layer idx's sliding window, as transformers' model of this type applies it (``sliding_window``)."""
        window = getattr(cfg, "sliding_window", None)
        if not window or self.sliding_window == "ignored":
            return None
        types = getattr(cfg, "layer_types", None) if self.sliding_window != "every_layer" else None
        return int(window) if types is None or types[idx] == "sliding_attention" else None

    def name_rules(self) -> list[dict[str, Any]]:
        """``names`` as weight rules (RegexRule fields, both ways) for ``model.layers.N.`` names, then ``fused`` as
        split rules (SplitRule fields: match, into; each part's rows are the model's)."""
        def pattern(module: str, head: str = r"(model\.layers\.\d+\.)") -> str:
            return "^" + head + re.escape(module).replace(re.escape("{e}"), r"(\d+)") + r"\."

        def template(module: str, head: str = "\\1") -> str:
            return head + module.replace("{e}", "\\2") + "."
        whole = [{"match": "^" + re.escape(old), "replace": new} for old, new in self.prefixes]
        # a renamed module under a prefixed text model (Gemma-3's language_model.model.): both at once (no chaining)
        inner = [{"match": pattern(old, re.escape(head) + r"(layers\.\d+\.)"), "replace": template(new, "model.\\1")}
                 for head, to in self.prefixes if to == "model." for old, new in self.names]
        return [*inner, *whole,
                *({"match": pattern(old), "replace": template(new), "inverse": (pattern(new), template(old))}
                  for old, new in self.names),
                *({"match": pattern(old), "into": [template(part) for part in parts]} for old, parts in self.fused)]

    def ignored(self) -> list[str]:
        """Ignore patterns for the tensors of its files the model does not read (``skipped``)."""
        return ["^" + re.escape(prefix) for prefix in self.skipped]

    def attention_recipe(self) -> tuple[str, dict[str, Any]]:
        if self.attention != "gqa":
            return self.attention, dict(self.attention_params)
        stated = {key: value for key, value in (("qkv_bias", self.qkv_bias), ("o_bias", self.o_bias))
                  if value is not None}
        stated |= {"partial_rotary": True} if self.partial_rotary else {}
        return "gqa", {"qk_norm": self.qk_norm, **stated, **dict(self.attention_params)}

    def check(self, cfg) -> None:
        """Refuse a config whose layers this code cannot build exactly (rather than load it as garbage)."""
        mult = int(getattr(cfg, "hc_mult", 1) or 1)
        if mult > 1:   # the draft side reads hidden_size * hc_mult (config.target_hidden_width); no target does
            raise refused(
                cfg, f"hc_mult={mult} asks for hyper-connections ({mult} residual streams, "
                f"handed to the draft {mult} x hidden_size wide), which draftsmith's target model does not compute: "
                "its layers keep one stream, so the draft would read the wrong width at its first step; allowed: 1, or "
                f"the key absent (one residual stream). {UNCOMPUTED}")
        if self.sliding_window in ("layer_types", "config"):
            layer_types_check(cfg)
        if self.partial_rotary:
            rotary_check(cfg)
        if self.moe and self.moe_layers(cfg):
            moe_check(cfg, self)
        if self.mrope:
            mrope_check(cfg, self.mrope)
        attention = dict(self.attention_params)
        if attention.get("rope_layers_key") is not None:
            rope_layers_check(cfg, attention["rope_layers_key"])
        options_check(cfg, self.options, [attention.get("scale_key"), attention.get("softcap_key"), self.logit_cap])
        if self.text_type is not None:
            text_type_check(cfg, self.text_type)

    def moe_recipe(self) -> tuple[str, dict[str, Any]]:
        """The registered ``moe`` component of its mixture-of-experts layers and its params (as attention_recipe)."""
        return self.moe_kind, dict(self.moe)

    def moe_params(self) -> MoEParams:
        """``moe`` as the ``moe: sparse`` component reads it (its defaults where the type states none): the one
        reading of the config keys it names, for moe_keys, moe_layers and moe_check alike (another moe_kind's
        params are its component's: MoEParams' defaults here)."""
        return MoEParams(**dict(self.moe)) if self.moe_kind == "sparse" else MoEParams()

    def moe_keys(self) -> set[str]:
        """The config keys this type's mixture-of-experts layers are read by (none for a dense type; for another
        moe_kind than sparse, those its layer rule reads: its component reads its own)."""
        if not self.moe:
            return set()
        keys = {self.moe_from, self.moe_step, self.moe_dense, self.moe_types, *(key for key, _ in self.moe_options)}
        keys |= {self.experts_key()} if self.moe_step is not None else set()   # the layer rule reads it
        keys |= {"first_k_dense_replace"} if self.moe_types is not None else set()   # moe_types: must agree
        if self.moe_kind != "sparse":   # a built-in component's params: each *_key names a key its factory reads
            stated = StackedMoEParams(**dict(self.moe)) if self.moe_kind == "stacked" else None
            return (keys | {v for f, v in stated or () if f.endswith("_key")}) - {None}
        p = self.moe_params()
        keys |= {p.experts_key, p.intermediate_key, p.top_k_key, p.shared_key, p.scaling_key}
        keys |= {"n_group", "topk_group"} if p.grouped else set()
        keys |= {"norm_topk_prob"} if p.norm_topk_prob == "config" else set()
        return keys - {None}

    def experts_key(self) -> str:
        """The config key of the routed experts' count that moe_step's rule reads: ``moe_experts``, else the moe
        params' experts_key (MoEParams' default, num_experts, for another moe_kind than sparse)."""
        return self.moe_experts or self.moe_params().experts_key

    def moe_layers(self, cfg, count: int | None = None) -> list[int]:
        """The layers whose MLP is the type's mixture of experts (as transformers' model of the type builds them),
        of the config's num_hidden_layers, or of the first ``count`` indices (past the last: an MTP layer continues
        the stack at index num_hidden_layers, and is MoE by the same rule, as vLLM and SGLang build DeepSeek-V3's)."""
        if not self.moe:
            return []
        layers = range(cfg.num_hidden_layers if count is None else count)
        if self.moe_from is not None:
            first = getattr(cfg, self.moe_from, None)
            if not isinstance(first, int) or isinstance(first, bool):
                raise refused(cfg, f"{self.moe_from}={first!r} does not say which layers are mixture-of-experts; "
                              f"allowed: a layer count (int). {LAYERS_FIX}")
            layers = [i for i in layers if i >= first]
        if self.moe_types is not None:
            layers = [i for i in layers if i >= cfg.num_hidden_layers or moe_types(cfg, self.moe_types)[i] == "sparse"]
        if self.moe_step is not None:   # Qwen's rule: none at all where the config has no experts
            step = getattr(cfg, self.moe_step, 1)
            if not isinstance(step, int) or isinstance(step, bool) or step < 1:
                raise refused(cfg, f"{self.moe_step}={step!r} does not say which layers are mixture-of-experts; "
                              f"allowed: a positive int. {LAYERS_FIX}")
            dense = set(getattr(cfg, self.moe_dense, None) or ()) if self.moe_dense else set()
            experts = getattr(cfg, self.experts_key(), None)
            layers = [i for i in layers if (i + 1) % step == 0 and i not in dense] if experts else []
        return list(layers)


def arch(**fixed):
    return lambda params=None, **_: TargetArch(**fixed)


# Which biases a type's layers have, as transformers' modeling code builds them: Llama reads attention_bias and
# mlp_bias, Qwen3 attention_bias only; Mistral and Ministral have none, Qwen2 q/k/v biases only, whatever the config
# says (transformers ignores the keys there, and drops bias tensors a file holds).
NO_BIAS = {"qkv_bias": False, "o_bias": False, "mlp_bias": False}
# Mixtral's files name its MoE block block_sparse_moe and its experts' gate / up / down projections w1 / w3 / w2
MIXTRAL_NAMES = (("block_sparse_moe.gate", "mlp.gate"),
                 *((f"block_sparse_moe.experts.{{e}}.{w}", f"mlp.experts.{{e}}.{proj}")
                   for w, proj in (("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj"))))
# Gemma-3's layers: Gemma's (target_options.GEMMA) with q/k norms, windowed where layer_types says sliding, each
# rotating with its layer type's rope
GEMMA3 = GEMMA | {"qk_norm": True, "sliding_window": "layer_types",
                  "attention_params": (*GEMMA["attention_params"], ("layer_type_rope", True))}
# DeepSeek-V3's mixture of experts (GLM-4.5's too): sigmoid scores in float32 (the router's tensors kept float32),
# the correction bias for choosing only, n_group / topk_group group-limited top-k in transformers' unsorted order,
# norm_topk_prob, routed_scaling_factor, n_shared_experts experts' width of shared MLP
DEEPSEEK_ROUTER = (("scoring", "sigmoid"), ("correction_bias", True), ("grouped", True), ("router_float32", True),
                   ("sorted_topk", False), ("experts_key", "n_routed_experts"), ("shared_key", "n_shared_experts"),
                   ("scaling_key", "routed_scaling_factor"))
# the vision-language types' files: their text model under model.language_model (the Hub's Qwen3-VL, transformers 5)
# or model (the Hub's Qwen2-VL / Qwen2.5-VL), their vision tower (not loaded) under model.visual or visual
VL = {"prefixes": (("model.language_model.", "model."),), "skipped": ("visual.", "model.visual.")}
TARGETS = {
    "llama": arch(sliding_window="ignored"),
    "mistral": arch(**NO_BIAS, sliding_window="every_layer"),
    # transformers reads a mistral config.json that has a layer_types key as ministral (its AutoConfig)
    "ministral": arch(**NO_BIAS, sliding_window="config"),
    "qwen2": arch(**NO_BIAS | {"qkv_bias": True}, sliding_window="layer_types"),
    "qwen3": arch(qk_norm=True, mlp_bias=False, sliding_window="layer_types"),
    # multimodal rope over three position streams, equal for text: 1-D rope (mrope_check); no deepstack without images
    "qwen2_vl": arch(**NO_BIAS | {"qkv_bias": True}, sliding_window="layer_types", mrope=(16, 24, 24), **VL),
    "qwen2_5_vl": arch(**NO_BIAS | {"qkv_bias": True}, sliding_window="layer_types", mrope=(16, 24, 24), **VL),
    "qwen3_vl": arch(qk_norm=True, mlp_bias=False, sliding_window="ignored", mrope=(24, 20, 20), **VL),
    # every layer's window when use_sliding_window (its config drops sliding_window otherwise); the router's weights
    # in the hidden dtype, the softmax in float32
    "qwen3_moe": arch(qk_norm=True, mlp_bias=False, sliding_window="every_layer", moe_step="decoder_sparse_step",
                      moe_dense="mlp_only_layers", moe=(("scoring", "softmax"), ("weights_in_hidden_dtype", True))),
    # every layer MoE under Mixtral's names; softmax in float32 over every expert, the top-k renormalised
    "mixtral": arch(**NO_BIAS, sliding_window="every_layer", names=MIXTRAL_NAMES, moe=(
        ("scoring", "softmax"), ("norm_topk_prob", True), ("experts_key", "num_local_experts"),
        ("intermediate_key", "intermediate_size"))),
    # Phi-3 / Phi-4: q | k | v and gate | up stored fused (split at load); partial_rotary_factor read (Phi-4-mini:
    # 0.75); every layer's window when sliding_window is set (layer_types unread)
    "phi3": arch(**NO_BIAS, sliding_window="every_layer", partial_rotary=True, fused=(
        ("self_attn.qkv_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
        ("mlp.gate_up_proj", ("mlp.gate_proj", "mlp.up_proj")))),
    "deepseek_v3": arch(attention="mla", attention_params=(("latent_norm_eps", 1e-6),), mlp_bias=False,
                        sliding_window="ignored", moe_from="first_k_dense_replace", moe=DEEPSEEK_ROUTER,
                        # DeepSeek's own keys for the router transformers computes (it ignores them): others refused
                        moe_options=(("topk_method", ("noaux_tc",)), ("scoring_func", ("sigmoid",)),
                                     ("moe_layer_freq", (1,)))),
    # GLM-4.5 / 4.6 / 4.7 (Glm4MoeForCausalLM): q/k/v biases by attention_bias, none on o_proj; per-head q/k norms
    # where use_qk_norm; the first partial_rotary_factor of each head rotates (its config's default 0.5); from layer
    # first_k_dense_replace on DeepSeek-V3's router; no window; its MTP layers (model.layers.{L}) are not read
    # GLM-4.7-Flash (Glm4MoeLiteForCausalLM): DeepSeek-V3's latent attention and router, the MoE layers those
    # mlp_layer_types names sparse (its default: all but the first); first_k_dense_replace unread, as transformers
    "glm4_moe_lite": arch(attention="mla", attention_params=(("latent_norm_eps", 1e-6),), mlp_bias=False,
                          sliding_window="ignored", moe_types="mlp_layer_types", moe=DEEPSEEK_ROUTER),
    "glm4_moe": arch(o_bias=False, mlp_bias=False, qk_norm="config", partial_rotary=True, sliding_window="ignored",
                     moe_from="first_k_dense_replace", moe=DEEPSEEK_ROUTER),
    # learned attention sinks; every layer MoE, its experts stacked with biases (moe: stacked), gate / up interleaved
    # in the clamped SwiGLU of swiglu_limit / swiglu_alpha; the bf16 layout (an MXFP4 one is refused: target_quant);
    # its norms' weights applied in float32 (transformers keeps them float32)
    "gpt_oss": arch(attention_params=(("sinks", True),), sliding_window="layer_types", moe_kind="stacked",
                    norm_params=(("float32_weight", True),), moe=(
        ("gate_up", "interleaved"), ("limit_key", "swiglu_limit"), ("alpha_key", "swiglu_alpha"), ("alpha", 1.702),
        ("up_offset", 1.0))),
    # Gemma-3 (1B, and the text model of 4B / 12B / 27B): GEMMA's layers, q/k norms, a window on the layers
    # layer_types marks sliding (rope per layer type: rope_local_base_freq there); attn_logit_softcapping unread
    "gemma3_text": arch(**GEMMA3),
    # Gemma-3 4B / 12B / 27B as transformers writes them (language_model.model.*, the vision tower and projector
    # not loaded) or as transformers 5 names them (model.language_model.*): gemma3_text's text model, its logits
    # uncapped as Gemma3ForConditionalGeneration's (text_config's final_logit_softcapping unread; the Hub's: null)
    "gemma3": arch(**GEMMA3 | {"logit_cap": None}, prefixes=(
        ("language_model.model.", "model."), ("language_model.lm_head.", "lm_head."),
        ("model.language_model.", "model.")), skipped=("vision_tower.", "multi_modal_projector.",
                                                       "model.vision_tower.", "model.multi_modal_projector.")),
    # Gemma-2: GEMMA's layers, one rope, a window on the layers layer_types marks sliding (every other one), the
    # attention's scores capped by attn_logit_softcapping (components.softcap)
    "gemma2": arch(**GEMMA | CAPPED_SCORES, sliding_window="layer_types"),
    # Gemma-1 (Gemma 2B / 7B, CodeGemma): GEMMA1's layers, one rope, no window
    "gemma": arch(**GEMMA1, sliding_window="ignored"),
    # SmolLM3: Llama's layers (q/k/v/o biases by attention_bias, MLP biases by mlp_bias), those whose no_rope_layers
    # entry is 0 unrotated (NoPE), a window on the layers layer_types marks sliding (by default the NoPE layers,
    # where use_sliding_window)
    "smollm3": arch(sliding_window="layer_types", attention_params=(("rope_layers_key", "no_rope_layers"),)),
}
# Kimi-K2 (its config.json's kimi_k2: transformers' deepseek_v3, as transformers reads Kimi-K2.5's text_config) and
# Kimi-K2.5 (kimi_k25: that text model beside a vision tower, not loaded; the Hub's files hold it under
# language_model.model / language_model.lm_head, transformers 5.24's save_pretrained its layers as ...model.blocks;
# tests/assembler/test_kimi_targets.py)
KIMI_VL = {"prefixes": (("language_model.model.blocks.", "model.layers."), ("language_model.model.", "model."),
                        ("language_model.lm_head.", "lm_head."), ("model.language_model.", "model.")),
           "skipped": ("vision_tower.", "mm_projector.", "model.vision_tower.", "model.mm_projector."),
           "text_type": "deepseek_v3"}
TARGETS |= {"kimi_k2": lambda params=None, **_: TargetArch(**{**dict(TARGETS["deepseek_v3"]()),
                                                                "config_as": "deepseek_v3"}),
            "kimi_k25": lambda params=None, **_: TargetArch(**{**dict(TARGETS["deepseek_v3"]()), **KIMI_VL})}


def moe_recipe(arch: Any) -> tuple[str, dict[str, Any]]:
    """A target record's moe recipe: its moe_recipe(), else (a plugin's record without one) its ``moe`` params'
    ``moe: sparse``."""
    made = getattr(arch, "moe_recipe", None)
    return made() if callable(made) else ("sparse", dict(getattr(arch, "moe", ())))


def target_record(registry, kind: Any) -> Any:
    """The target type's record for a config's model_type (``registry.build("target", kind)``), if registered: None
    for another type, and for a model_type that is no name (a config.json's list or number)."""
    return registry.build("target", kind) if isinstance(kind, str) and ("target", kind) in registry.components \
        else None


def apply_windows(cfg, layers: Sequence[nn.Module], arch: TargetArch) -> None:
    """Give each sliding-window layer's attention a windowed backend (keys within the last ``window``
    positions of the query, exactly transformers' ``kv_idx > q_idx - sliding_window``); which layers have one is
    ``arch``'s rule (:meth:`TargetArch.window`)."""
    from draftsmith.components.sliding import windowed

    shared: dict[tuple[int, int], object] = {}  # one wrapper per (backend, window): its mask is built once
    for i, layer in enumerate(layers):
        window = arch.window(cfg, i)
        if window is not None:
            inner = layer.self_attn.backend
            layer.self_attn.backend = shared.setdefault((id(inner), window), windowed(inner, window))


def mtp_layer_patterns(raw: Mapping[str, Any]) -> list[str]:
    """Ignore patterns for the MTP layers a target config declares (``num_nextn_predict_layers`` layers under
    ``model.layers.{L..}``): they are a draft's weights (spec deepseek-mtp), not the target's."""
    n = int(raw.get("num_nextn_predict_layers") or raw.get("num_mtp_layers") or 0)
    L = raw.get("num_hidden_layers")
    if not n or not isinstance(L, int):
        return []
    return [rf"^model\.layers\.{i}\." for i in range(L, L + n)]


MTP_FUSION = re.compile(r"^model\.layers\.(\d+)\.eh_proj\.weight$")   # an MTP layer's own tensor (DeepSeek-V3, GLM)


def undeclared_mtp_note(raw: Mapping[str, Any], names: Sequence[str]) -> str | None:
    """The note for a target whose files hold MTP layers (``model.layers.{i}.eh_proj`` past its decoder layers)
    that its config does not declare: those layers' tensors misfit the target, and the key that says so is named."""
    n = int(raw.get("num_nextn_predict_layers") or raw.get("num_mtp_layers") or 0)
    L = raw.get("num_hidden_layers")
    held = sorted(i for name in names if (m := MTP_FUSION.match(name)) and isinstance(L, int) and (i := int(m[1])) >= L)
    if not held or held[-1] < L + n:
        return None
    key = "num_mtp_layers" if "num_mtp_layers" in raw and "num_nextn_predict_layers" not in raw \
        else "num_nextn_predict_layers"
    said = "is not stated" if key not in raw else "is null" if raw[key] is None else f"is {raw[key]!r}"
    return (f"note: model.layers.{held[0]}.eh_proj.weight is an MTP layer's (past the {L} decoder layers), but "
            f"config.json's {key} {said} ({n} MTP layers declared); set it to the MTP layers the files hold "
            f"({held[-1] - L + 1}): the target does not read them (a draft may: spec glm-mtp, deepseek-mtp)")


__all__ = ["TARGETS", "TargetArch", "UnsupportedTarget", "apply_windows", "config_path", "moe_check",
           "moe_recipe", "moe_refusal", "moe_sizes", "mrope_check", "mrope_covers", "mtp_layer_patterns", "refused",
           "target_record", "undeclared_mtp_note"]
