"""What a spec may say about each built-in component (its params model) and the canonical names it holds
(``Component.holds``), apart from the modules that build it: torch-free, so that the built-in catalog registers
every component without importing torch (a spec file's problems and ``list`` are said in a torch-free process). The
factories and modules live in their components' own files (gqa, mlp, mla, mtp, fusion, quant), which re-export
their params models; the held names and helpers moved here from fusion, gqa, mla, mtp and quant."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, ValidationInfo,
                      field_validator)

from draftsmith import limits
from draftsmith.components.eagle3_config import repeated
from draftsmith.components.weights import pattern_problem
from draftsmith.errors import short
from draftsmith.hooks.records import HIDDEN_NORM, ConfigFirst


# --- attention: gqa, mla ---
class GQAParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rope: Literal["neox", "interleaved"] = "neox"
    # auto: the config's `qkv_bias` / `attention_bias`; a draft config that states neither takes what its checkpoint
    # holds (applied and said by assembler.build.draft_config), else false
    qkv_bias: Literal["auto"] | bool = "auto"
    o_bias: Literal["auto"] | bool = "auto"   # auto: the config's `attention_bias` (Qwen2's o_proj has none: false)
    # per-head q/k RMSNorms (Qwen3's q_norm / k_norm); config: where the config's use_qk_norm is true (GLM-4.5's key,
    # as transformers' Glm4Moe reads it; absent: none)
    qk_norm: Literal["config"] | bool = False
    # true: rotate the first int(head_dim * partial_rotary_factor) channels of each head (the config's rope_parameters'
    # key, as transformers' Phi-3 reads it), the rest unrotated; false: whole heads, the key unread (Llama's model)
    partial_rotary: bool = False
    # the rotation's base: auto, the config's rope_theta (transformers, vLLM, SGLang), or the one the draft was
    # trained with: EAGLE's and SpecForge's trainers rotate with 10000 whatever the draft config says (SpecForge
    # issue 265)
    rope_theta: Literal["auto", 10000] | Annotated[float, Field(gt=0, allow_inf_nan=False)] = "auto"
    # a learned logit per head (self_attn.sinks [heads]) joins each query's softmax and carries no value (gpt-oss);
    # the attention backend computes it (components.backends: every built-in one; a plugin's that does not is refused)
    sinks: bool = False
    # the config key whose value v scales the attention's scores by v ** -0.5 (Gemma's query_pre_attn_scalar); None,
    # or the key absent (null): head_dim ** -0.5
    scale_key: str | None = None
    # the config key of a tanh cap on the scores (Gemma-2's attn_logit_softcapping; null there: none): such a layer
    # attends in plain torch (components.softcap), whatever the backend
    softcap_key: str | None = None
    # a config's rope_parameters holding one rope per layer type: each layer rotates with its layer_types entry's
    # (transformers 5's Gemma-3); false: such a config is refused (the model of its type computes one rope)
    layer_type_rope: bool = False
    # the config key of a per-layer list whose 0 entries mark the layers that rotate neither q nor k (SmolLM3's
    # no_rope_layers: 1 rotates, 0 a NoPE layer); None: every layer rotates
    rope_layers_key: str | None = None


QK_NORM_KEY = "use_qk_norm"   # what ``qk_norm: config`` reads: per-head q/k norms where true (GLM-4.5's config)
PARTIAL_ROTARY_KEY = "partial_rotary_factor"   # what ``partial_rotary`` reads (top level or in rope_parameters)


def gqa_keys(params: Mapping[str, Any]) -> set[str]:
    """The config keys a GQA attention with these spec params (plain data) reads beyond a Llama config's: use_qk_norm
    where qk_norm: config, partial_rotary_factor where partial_rotary, its scale_key, softcap_key and
    rope_layers_key; ``inspect`` does not call them unread."""
    keys = {QK_NORM_KEY if params.get("qk_norm") == "config" else None,
            PARTIAL_ROTARY_KEY if params.get("partial_rotary") is True else None,
            params.get("scale_key"), params.get("softcap_key"), params.get("rope_layers_key")}
    return {k for k in keys if isinstance(k, str)}


def gqa_reads(_, draft_config: Mapping[str, Any]) -> dict[str, Any]:
    """rope_theta auto as the draft config states it (its rope_parameters', else its top level's; Component.reads),
    where it does at the top level; nothing where it does not (a nested config: unknown here)."""
    rope = draft_config.get("rope_parameters")
    theta = rope.get("rope_theta") if isinstance(rope, Mapping) else None
    theta = draft_config.get("rope_theta") if theta is None else theta
    return {} if theta is None else {"rope_theta": theta}


def gqa_holds(_: dict[str, Any]) -> tuple[str, ...]:
    """Canonical names a GQA attention holds (see hooks.records.Component.holds)."""
    return (r"^layers\.\d+\.self_attn\.(q|k|v|o)_proj\.(weight|bias)$",
            r"^layers\.\d+\.self_attn\.(q|k)_norm\.weight$", r"^layers\.\d+\.self_attn\.sinks$")


class MLAParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # auto: the config's `rope_interleave` (absent = true, DeepseekV3Config's default: DeepSeek and Mistral MLA
    # weights rotate adjacent pairs); neox rotates halves
    rope: Literal["auto", "neox", "interleaved"] = "auto"
    # the eps of q_a_layernorm / kv_a_layernorm: the config's rms_norm_eps (vLLM, SGLang), or a number (DeepSeek's
    # reference code and transformers fix 1e-6, whatever rms_norm_eps says: the deepseek_v3 target's)
    latent_norm_eps: Literal["config"] | Annotated[float, Field(gt=0, lt=1)] = "config"


def mla_holds(_: dict[str, Any]) -> tuple[str, ...]:
    """Canonical names an MLA attention holds (see hooks.records.Component.holds)."""
    return (r"^layers\.\d+\.self_attn\.(q|q_a|q_b|kv_b|o)_proj\.(weight|bias)$",
            r"^layers\.\d+\.self_attn\.kv_a_proj_with_mqa\.(weight|bias)$",
            r"^layers\.\d+\.self_attn\.(q_a|kv_a)_layernorm\.weight$")


# --- mlp: swiglu ---
class MLPParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # auto: the config's `mlp_bias` (Llama's key, as transformers and vLLM read a draft's), else false
    bias: Literal["auto"] | bool = "auto"
    # the gate's activation: silu (SwiGLU), or gelu_tanh (GeGLU: transformers' gelu_pytorch_tanh, Gemma's)
    activation: Literal["silu", "gelu_tanh"] = "silu"


# --- norm: rms ---
class RMSParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # the weight is stored as an offset from this (Gemma's 1.0: x * (1 + w), in float32 before the cast back)
    offset: Annotated[float, Field(allow_inf_nan=False)] = 0.0
    # the weight applied in float32 before the cast back (gpt-oss's norms: transformers keeps them in float32), where
    # Llama's RMSNorm casts to the input's dtype first
    float32_weight: bool = False


# --- layer: llama ---
class LayerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # norms of the attention's and the MLP's outputs before their residual adds (Gemma's post_attention_layernorm and
    # post_feedforward_layernorm, held as attn_output_norm / mlp_output_norm); false: identity slots
    post_norms: bool = False


# --- moe: sparse (a target's mixture-of-experts layers; each type's reading of its config is data, targets.TARGETS) ---
class MoEParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    scoring: Literal["sigmoid", "softmax"] = "softmax"   # the router's scores of its logits
    correction_bias: bool = False   # e_score_correction_bias: added to the scores for choosing experts only
    grouped: bool = False           # choose topk_group groups of experts first (by their top two scores' sum)
    router_float32: bool = False    # router logits in float32, its tensors kept float32 (DeepSeek-V3)
    weights_in_hidden_dtype: bool = False   # the chosen weights cast to the hidden dtype before the product (Qwen3)
    norm_topk_prob: Literal["config"] | bool = "config"   # the chosen weights divided by their sum
    sorted_topk: bool = True        # the chosen experts in score order (torch.topk's sorted), as the type's
    # router lists them: their weights' sum (norm_topk_prob) rounds in that order
    experts_key: str = "num_experts"               # the config keys of the routed experts' count, width and top-k
    intermediate_key: str = "moe_intermediate_size"
    top_k_key: str = "num_experts_per_tok"
    shared_key: str | None = None     # the config key of the shared experts' count (one MLP that many times wide)
    scaling_key: str | None = None    # the config key of the routed output's factor


# --- moe: stacked (routed experts held as stacked tensors with biases; each type's reading is data, TARGETS) ---
class StackedMoEParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    experts_key: str = "num_local_experts"         # the config keys of the routed experts' count, width and top-k
    intermediate_key: str = "intermediate_size"
    top_k_key: str = "num_experts_per_tok"
    router_bias: bool = True          # router.bias beside router.weight (its logits' linear has a bias)
    # the 2W columns of experts.gate_up_proj [E, hidden, 2W]: gate | up halves, or interleaved (gate 0::2, up 1::2)
    gate_up: Literal["halves", "interleaved"] = "halves"
    # the experts' activation: (clamp(up) + up_offset) * g * sigmoid(alpha * g), g = gate clamped above at limit
    # and up at +-limit; limit_key: the config key of the limit (None: no clamp); alpha_key: the config key of
    # alpha, else ``alpha`` (1, offset 0, no limit: silu(gate) * up)
    limit_key: str | None = None
    alpha_key: str | None = None
    alpha: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0
    up_offset: Annotated[float, Field(allow_inf_nan=False)] = 0.0


# --- fusion: eagle1, eagle3, mtp ---
def _auto(value: Any) -> Any:
    return None if value == "auto" else value


_auto.accepts = "'auto'"   # the spelling this validator adds to the field's type (what a spec error lists)


# A value the spec states, or `auto` (kept as None) or left out: read the draft config's key, else the default,
# said once.
Auto = (BeforeValidator(_auto), PlainSerializer(lambda v: "auto" if v is None else v), ConfigFirst())
Flag = Annotated[(bool | None, *Auto)]
# Where the final norm's output goes. head: before the head only, the pre-norm state is fed back (EAGLE-3
# reference; SpecForge norm_output=true; speculators norm_output=false). feed_back: before the head AND fed back
# to the next draft step (EAGLE 3.1; speculators / vLLM / SGLang norm_output=true). none: never applied
# (SpecForge norm_output=false).
NormOutput = Literal["none", "head", "feed_back"]


class Eagle1Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # auto: the draft config's `bias` (speculators: `fusion_bias`), and a MISSING key means true
    bias: Literal["auto"] | bool = "auto"
    # an RMSNorm on the token embedding before fc (fc.embed_norm; speculators' `layernorms` drafts and HASS's
    # embed_layernorm)
    embed_norm: bool = False


class AuxLayers(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    ids: tuple[int, ...] | None = None       # None: ids from the draft config, else [2, L//2, L-3]
    at: Literal["input", "output"] = "input"  # ids name layer inputs (HF hidden_states[id], vLLM) or outputs (SGLang)

    @field_validator("ids")
    @classmethod
    def _distinct(cls, ids):
        if ids is not None and not ids:   # was read as "not given": the config's ids or the default taps
            raise ValueError("[] names no layer; leave ids out (or null) for the draft config's ids or the default "
                             "[2, L//2, L-3]")
        if ids is not None and (dup := repeated(list(ids))):
            raise ValueError(f"{short(list(ids))} names layer(s) {short(dup)} more than once; taps must be distinct")
        return ids


class Eagle3Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    norm_before_residual: Flag = Field(description=(   # required: engines disagree on the default
        "Engines disagree on its default and the weights cannot show it: state true or false as the draft was "
        "trained (true: the residual is the normed hidden state), or auto to read the draft config's key"))
    aux_layers: Literal["auto"] | AuxLayers = "auto"
    num_aux: int | None = Field(None, ge=1)  # explicit count > num_aux_hidden_states > len(ids) > 3
    fc_norm: Flag = False                    # one RMSNorm per aux state before fc (EAGLE 3.1)
    norm_before_fc: Flag = False             # one RMSNorm over the concatenated aux states (gpt-oss)
    norm_output: Annotated[(NormOutput | None, *Auto)] = "head"

    @field_validator("num_aux")
    @classmethod
    def _count_fits_ids(cls, num_aux, info: ValidationInfo):
        # both stated and different: the fc's width cannot be both (the spec alone shows it). A field's check, not
        # the model's: pydantic runs a model's after-checks only when every field validated, and a spec's problems
        # are all said at once (a missing norm_before_residual beside this one hid it). aux_layers comes first, so
        # info.data holds it where it validated
        layers = info.data.get("aux_layers", "auto")
        ids = None if layers == "auto" else layers.ids
        if num_aux is not None and ids and len(ids) != num_aux:
            raise ValueError(f"num_aux {num_aux} and aux_layers.ids {short(list(ids))} ({len(ids)} layers) "
                             "disagree; state one of them, or make them agree")
        return num_aux

    @field_validator("norm_before_fc")
    @classmethod
    def _one_norm_before_fc(cls, norm_before_fc, info: ValidationInfo):
        # both stated true: exclusive whatever the checkpoint holds, so the spec alone is refused (a field's check,
        # as above; fc_norm comes first). A conflict the draft config makes is refused when the draft is built
        if norm_before_fc is True and info.data.get("fc_norm") is True:
            raise ValueError("fc_norm and norm_before_fc are exclusive (one norm per aux state, EAGLE 3.1, or one "
                             "over their concatenation, gpt-oss style); state the one the draft was trained with")
        return norm_before_fc


def eagle1_holds(params: dict[str, Any]) -> tuple[str, ...]:
    """Canonical names an EAGLE-1 fusion holds (see hooks.records.Component.holds): fc, its bias unless refused,
    the embedding's norm where asked for."""
    return (r"^fc\.weight$", *((r"^fc\.bias$",) if params.get("bias", "auto") is not False else ()),
            *((r"^fc\.embed_norm\.weight$",) if params.get("embed_norm") is True else ()))


AUX_NORM = r"^fc\.aux_norm\.\d+\.weight$"   # canonical: a per-aux norm before fc (fc_norm)
INPUT_NORM = r"^fc\.input_norm\.weight$"      # canonical: the norm over the concatenated aux states (norm_before_fc)


def eagle3_holds(params: dict[str, Any]) -> tuple[str, ...]:
    """Canonical names an EAGLE-3 fusion holds: fc, the per-aux norms and the norm over the concatenation unless
    refused, and the first layer's hidden_norm (its input layer reads one)."""
    return (r"^fc\.weight$", HIDDEN_NORM,
            *((AUX_NORM,) if params.get("fc_norm", "auto") is not False else ()),
            *((INPUT_NORM,) if params.get("norm_before_fc", "auto") is not False else ()))


class MTPParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # vLLM zeroes the token embedding at position 0 ("not needed by MTP"); SGLang's deepseek_nextn and transformers'
    # MtpLayer do not (an oracle hunt of round 27 read all three)
    zero_first_embedding: bool = True
    # cat([enorm(e), hnorm(h)]) (DeepSeek) or cat([hnorm(h), enorm(e)]) (transformers' mtp_hidden_states_first)
    order: Literal["embed_first", "hidden_first"] = "embed_first"


def mtp_holds(_: dict[str, Any]) -> tuple[str, ...]:
    """Canonical names an MTP fusion holds (see hooks.records.Component.holds)."""
    return (r"^fc\.(enorm|hnorm|eh_proj)\.weight$",)


# --- quant: fp8 ---
BlockSide = Annotated[int, Field(ge=1, le=limits.WIDTH)]   # a side longer than the weight is one scale


def _bounded(pattern: str) -> str:
    # refused in the spec, not when the first module name is searched; each pattern on its own (quant.modules.N),
    # so that every bad one is said at once
    if (why := pattern_problem(pattern)) is not None:
        raise ValueError(f"{short(pattern)}: {why}")
    return pattern


Bounded = Annotated[str, AfterValidator(_bounded)]


class FP8Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    scheme: Literal["tensor", "channel", "block"] = "block"
    block: tuple[BlockSide, BlockSide] = (128, 128)   # rows x columns of a weight per scale (scheme: block)
    # regexes searched in canonical module names (after the weight rules: vLLM PR 49900 matched ignore lists
    # before its prefix rename); a Linear is quantized when some `modules` pattern and no `exclude` matches
    modules: tuple[Bounded, ...] = (r"^layers\.\d+\.",)
    exclude: tuple[Bounded, ...] = ()
    # none: full-precision inputs; dynamic: fp8 inputs with a scale per token (tensor and channel schemes) or per
    # token and group of block[1] channels (block); static: inputs quantized with the checkpoint's input_scale. Both
    # on every device
    activation: Literal["none", "dynamic", "static"] = "none"
    # the stored name of a block scale (scheme: block): DeepSeek-V3's / FineGrainedFP8's, or compressed-tensors'
    block_scale: Literal["weight_scale_inv", "weight_scale"] = "weight_scale_inv"
