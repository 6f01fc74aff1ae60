"""The built-in layout detector: the family comes from tensor names and config fields, never ``architectures``
or ``num_hidden_layers`` alone.

Each family is a row of data: the spec that loads it, regexes that must each match some tensor name, regexes no
name may match, config keys of which one must be present / none may be, the checks whose findings become
assumptions, and the values a proposed spec takes over its family spec's for that row (``settings``). Rows are
tried most specific first; the first whose conditions all hold answers. A checkpoint that fits no row gets the
closest families instead (:mod:`draftsmith.assembler.fit`), scored partly by how far each row's conditions hold
(:func:`condition_share`).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from draftsmith.components.fusion import config_bias
from draftsmith.components.params import AUX_NORM, INPUT_NORM, PARTIAL_ROTARY_KEY, QK_NORM_KEY
from draftsmith.errors import short_text
from draftsmith.hooks import LayoutMatch

if TYPE_CHECKING:
    from draftsmith.registry.registry import Registry
    from draftsmith.specs.schema import Spec

HIDDEN_NORM = r"^(model\.)?(midlayer|layers\.0)\.hidden_norm\.weight$"
SPECULATORS = ("speculators_config", "speculators_model_type", "transformer_layer_config")


@dataclass(frozen=True)
class Family:
    spec: str
    reason: str
    require: tuple[str, ...]                 # each matches at least one tensor name
    forbid: tuple[str, ...] = ()             # none matches any tensor name
    config_any: tuple[str, ...] = ()         # one of these config keys is present (when given)
    config_none: tuple[str, ...] = ()        # none of these config keys is present
    checks: tuple[str, ...] = ()             # named checks (CHECKS) whose findings are assumptions
    # (dotted path in the spec's data, value): what this row's checkpoints hold that the family spec does not say
    # (e.g. the rotary order Hugging Face names imply); `inspect` writes them into the spec it proposes
    settings: tuple[tuple[str, Any], ...] = ()


# The MTP (NextN) rows share their tensor names; what tells GLM-4.5's GQA block from a Llama-style one where its
# tensors may not (attention_bias false, no q/k norms) is a config key read by glm-mtp's attention (qk_norm: config,
# partial_rotary) that its config always states and a Llama or DeepSeek-V3 one does not; absent, both read alike
PARTIAL_QK_KEYS = (QK_NORM_KEY, PARTIAL_ROTARY_KEY)
MLA_MTP = r"^model\.layers\.\d+\.self_attn\.kv_a_proj_with_mqa\.weight$"   # DeepSeek-V3's MTP block: latent attention
MTP = (r"^model\.layers\.\d+\.eh_proj\.weight$", r"^model\.layers\.\d+\.enorm\.weight$")

FAMILIES: tuple[Family, ...] = (
    Family("glm-mtp", "model.layers.L.{enorm,hnorm,eh_proj} with a GQA block and use_qk_norm / partial_rotary_factor "
                      "in the config (GLM-4.5 / 4.6 / 4.7 MTP / NextN layer: partial rotation, q/k norms by config)",
           MTP, forbid=(MLA_MTP,), config_any=PARTIAL_QK_KEYS),
    Family("deepseek-mtp", "model.layers.L.{enorm,hnorm,eh_proj} (DeepSeek-V3 MTP / NextN layer)", MTP),
    Family("eagle-mla-mistral", "eagle_linear and latent attention in Mistral names (MLA EAGLE, Mistral format)",
           (r"^eagle_linear\.weight$", r"^layers\.\d+\.attention\.wkv_a_with_mqa\.weight$"), checks=("layers",)),
    Family("eagle-mla-deepseek", "model.fc and latent attention in DeepSeek-V3 names (MLA EAGLE)",
           (r"^model\.fc\.weight$", r"^model\.layers\.\d+\.self_attn\.kv_a_proj_with_mqa\.weight$"),
           checks=("layers",)),
    Family("eagle-mla-deepseek", "fc and latent attention in DeepSeek-V3 names without model. (an MLA EAGLE "
                                 "written by `draftsmith convert --to layers`)",
           (r"^fc\.weight$", r"^layers\.\d+\.self_attn\.kv_a_proj_with_mqa\.weight$"), checks=("layers",)),
    Family("eagle-mistral", "eagle_linear and layers.N.attention.wq/wk/wv/wo with params.json (Mistral-native "
                            "GQA EAGLE)",
           (r"^eagle_linear\.weight$", r"^layers\.\d+\.attention\.wq\.weight$"), config_any=("dim", "n_layers"),
           checks=("layers", "rope")),
    # The same tensors in Hugging Face names say nothing of Mistral: its rotary order is read from rope_interleave
    # (the key `draftsmith convert --to layers` writes for a Mistral draft), else it is transformers' default (neox),
    # said; the post-norm feedback no Hugging Face config states is said either way.
    Family("eagle-mistral", "fc, input_layernorm in layer 0, a final norm, no hidden_norm and rope_interleave in "
                            "the config (the Mistral-native GQA EAGLE in Hugging Face names, as `draftsmith convert "
                            "--to layers` writes it)",
           (r"^fc\.weight$", r"^layers\.0\.input_layernorm\.weight$", r"^norm\.weight$"),
           forbid=(r"hidden_norm", r"^lm_head\.weight$"), config_any=("rope_interleave",),
           checks=("layers", "post_norm")),
    Family("eagle-mistral", "fc, input_layernorm in layer 0, a final norm and no hidden_norm, in Hugging Face names "
                            "with no rope_interleave key (an EAGLE-1-style fusion over full decoder layers and a "
                            "final norm; nothing in it says Mistral: its rotary order is transformers' default)",
           (r"^fc\.weight$", r"^layers\.0\.input_layernorm\.weight$", r"^norm\.weight$"),
           forbid=(r"hidden_norm", r"^lm_head\.weight$"), config_none=("rope_interleave",),
           checks=("layers", "hf_rope", "post_norm"), settings=(("draft.attention.rope", "neox"),)),
    Family("eagle3-speculators", "fc, hidden_norm and a speculators config (speculators_config / "
                                 "transformer_layer_config; EAGLE-3, vLLM)",
           (r"^fc\.weight$", HIDDEN_NORM), config_any=SPECULATORS, checks=("layers", "eagle3")),
    Family("eagle3.1-llama", "fc, hidden_norm and per-aux fc_norm.N before fc (EAGLE 3.1)",
           (r"^(model\.)?fc\.weight$", HIDDEN_NORM, r"^(model\.)?fc_norm\.\d+\.weight$"), config_none=SPECULATORS,
           checks=("layers", "eagle3")),
    Family("eagle3-llama", "model.fc and model.layers.0.hidden_norm without fc_norm (NeMo Automodel EAGLE-3)",
           (r"^model\.fc\.weight$", r"^model\.layers\.0\.hidden_norm\.weight$"), config_none=SPECULATORS,
           checks=("layers", "eagle3")),
    Family("eagle3-norm-before-fc", "fc, hidden_norm and input_norm over the concatenated aux states "
                                    "(norm_before_fc, gpt-oss style EAGLE-3)",
           (r"^fc\.weight$", HIDDEN_NORM, r"^input_norm\.weight$"), config_none=SPECULATORS,
           checks=("layers", "eagle3")),
    Family("eagle3-llama", "midlayer.* tensors with hidden_norm and fc (EAGLE-3, yuhuili/lmsys)",
           (r"^fc\.weight$", r"^midlayer\.hidden_norm\.weight$"), forbid=(r"^layers\.",),
           config_none=SPECULATORS, checks=("layers", "eagle3")),
    Family("eagle3-llama", "layers.N.* tensors with hidden_norm in layer 0 and fc (EAGLE-3 multi-layer, "
                           "lmsys / SpecForge)",
           (r"^fc\.weight$", r"^layers\.0\.hidden_norm\.weight$"), config_none=SPECULATORS,
           checks=("layers", "eagle3")),
    Family("eagle1-speculators", "fusion_fc and transformer.* with embedding_layernorm, transformer.input_layernorm "
                                 "and pre_lm_head_layernorm (EAGLE-1 / HASS, older speculators layout, layernorms)",
           (r"^fusion_fc\.weight$", r"^embedding_layernorm\.weight$", r"^transformer\.input_layernorm\.weight$",
            r"^pre_lm_head_layernorm\.weight$"), checks=("bias", "layernorms"),
           settings=(("draft.norms.input", "all"), ("draft.norms.final", True), ("draft.fusion.embed_norm", True))),
    Family("eagle1-speculators", "fusion_fc and transformer.* without input_layernorm (EAGLE-1 / HASS, older "
                                 "speculators layout)",
           (r"^fusion_fc\.weight$", r"^transformer\.post_attention_layernorm\.weight$"),
           forbid=(r"^transformer\.input_layernorm\.weight$", r"^embedding_layernorm\.weight$",
                   r"^pre_lm_head_layernorm\.weight$"), checks=("bias", "layernorms")),
    Family("eagle1-llama-fp8", "fc over [embed; hidden], layer 0 without input_layernorm and FP8 scales in the "
                               "layers (EAGLE-1, yuhuili, FP8 e4m3 linears)",
           (r"^fc\.weight$", r"^layers\.0\.post_attention_layernorm\.weight$",
            r"^layers\.\d+\.\S+\.weight_scale(_inv)?$"),
           forbid=(r"^layers\.0\.input_layernorm\.weight$", r"^layers\.0\.hidden_norm\.weight$"),
           checks=("bias",)),
    Family("eagle1-llama", "fc over [embed; hidden] and layer 0 without input_layernorm (EAGLE-1, yuhuili)",
           (r"^fc\.weight$", r"^layers\.0\.post_attention_layernorm\.weight$"),
           forbid=(r"^layers\.0\.input_layernorm\.weight$", r"^layers\.0\.hidden_norm\.weight$"),
           checks=("bias",)),
)


def layer_count(names: Sequence[str]) -> int:
    # a run of more than 18 digits is no layer index (and int() refuses past 4300 digits): such a name is text here;
    # assembling it is refused by the spec's layer bound
    found = {int(m.group(2)) for n in names if (m := re.match(r"^(model\.)?layers\.(\d{1,18})\.", n))}
    return max(found) + 1 if found else (1 if any(n.startswith("midlayer.") for n in names) else 0)


def _check_layers(spec: str, config: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    key = "n_layers" if "n_layers" in config and "num_hidden_layers" not in config else "num_hidden_layers"
    said = config.get(key)   # a params.json's own key: n_layers
    inner = config.get("transformer_layer_config")
    said = inner.get("num_hidden_layers", said) if isinstance(inner, Mapping) else said
    n = layer_count(names)
    if said is None or said == n:
        return []
    layout = "the midlayer layout has exactly 1 layer" if n == 1 and any(x.startswith("midlayer.") for x in names) \
        else f"the tensor names hold {n} layer(s)"
    return [f"config says {key}={said}; {layout} (the names win)"]


def _check_bias(spec: str, config: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    bias = any(n in names for n in ("fc.bias", "fusion_fc.bias"))
    key, said = config_bias(config)
    declared = True if said is None else bool(said)  # a missing key means a bias (the reference's default)
    return [] if declared == bias else \
        [f"config {key}={'missing' if said is None else said} but the fusion's bias is "
         f"{'present' if bias else 'absent'}"]


def _check_layernorms(spec: str, config: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    # speculators' EAGLE-1 config says whether it has the extra norms; the tensor names decide (a contradiction said)
    held = "embedding_layernorm.weight" in names
    said = config.get("layernorms")
    return [] if not isinstance(said, bool) or said == held else \
        [f"config layernorms={str(said).lower()} but embedding_layernorm is {'present' if held else 'absent'} "
         "(the tensor names win)"]


def _check_rope(spec: str, config: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    return ["rotary pairs: interleaved on the native q/k rows (Mistral's order); `draftsmith convert --to layers` "
            "permutes them for neox"]


def _check_hf_rope(spec: str, config: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    return ["attention.rope: neox (assumed: q/k rows in Hugging Face names and no rope_interleave key mean "
            "transformers' default order; rows kept in Mistral's native order need rope: interleaved)"]


def _check_post_norm(spec: str, config: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    return ["feed_back: post_norm (assumed: the Mistral EAGLE's, which no Hugging Face config key states; a draft "
            "that feeds back the state before its final norm needs feed_back: pre_norm)"]


CHECKS: dict[str, Callable[[str, Mapping[str, Any], Sequence[str]], list[str]]] = {
    "layers": _check_layers, "bias": _check_bias, "layernorms": _check_layernorms, "rope": _check_rope,
    "hf_rope": _check_hf_rope,
    "post_norm": _check_post_norm, "eagle3": lambda spec, config, names: eagle3_notes(spec, config, names)}


def matcher(names: Sequence[str], seen: dict[str, bool] | None = None) -> Callable[[str], bool]:
    """``some(pattern)``: whether any of ``names`` matches ``pattern``, each pattern searched once (the rows share
    half their patterns) and compiled once (re.search's cache lookup per name was half the time). ``seen``:
    pattern -> answer, shared by the callers that score rows over one listing."""
    seen = {} if seen is None else seen

    def some(pattern: str) -> bool:
        if pattern not in seen:
            seen[pattern] = any(map(re.compile(pattern).search, names))
        return seen[pattern]
    return some


def fits(family: Family, config: Mapping[str, Any], some: Callable[[str], bool]) -> bool:
    """Whether every condition of ``family`` holds over a listing (``some``: its :func:`matcher`)."""
    return (all(some(p) for p in family.require) and not any(some(p) for p in family.forbid)
            and (not family.config_any or any(k in config for k in family.config_any))
            and not any(k in config for k in family.config_none))


def builtin_family(config: Mapping[str, Any], tensor_names: Sequence[str]) -> Family | None:
    """The first built-in row whose conditions all hold, or None."""
    some = matcher(list(tensor_names))
    return next((family for family in FAMILIES if fits(family, config, some)), None)


def row_settings(match: LayoutMatch, config: Mapping[str, Any], names: Sequence[str]) -> tuple[tuple[str, Any], ...]:
    """What the built-in row that detected ``match`` holds over its family spec (``Family.settings``); none where a
    plugin's detector answered or the row's spec is not the match's."""
    family = None if match.by_plugin else builtin_family(config, names)
    return family.settings if family is not None and family.spec == match.spec else ()


def detect_builtin_layout(config: Mapping[str, Any], tensor_names: Sequence[str]) -> LayoutMatch | None:
    names = list(tensor_names)
    family = builtin_family(config, names)
    if family is None:
        return None
    notes = [note for check in family.checks for note in CHECKS[check](family.spec, config, names)]
    return LayoutMatch(family.spec, family.reason, tuple(notes))


# the EAGLE-3 flags the tensors show: per-aux norms and a norm over the concatenation, by their published names
# (fc_norm.N, input_norm) and their canonical ones (what a spec's rules rename a family's own names to)
SHOWN = {"fc_norm": rf"(^|\.)fc_norm\.\d+\.weight$|{AUX_NORM}",
         "norm_before_fc": rf"^(model\.)?input_norm\.weight$|{INPUT_NORM}"}


def eagle3_values(spec: str | Spec, config: Mapping[str, Any], names: Sequence[str],
                  registry: Registry | None = None) -> tuple[dict[str, Any], list[str]]:
    """Every EAGLE-3 fact the weights cannot show, with where its value came from; the two the weights DO show
    (per-aux norms, a norm over the concatenation) are taken from the tensor names when the config is silent.
    ``spec`` (a name or a loaded Spec) and its fusion are looked up in ``registry`` (default: the default)."""
    from draftsmith.assembler.config import flatten_draft_config
    from draftsmith.components.eagle3_config import config_states, describe_facts
    from draftsmith.specs.loader import load_spec
    from draftsmith.specs.resolve import fusion_params

    cfg = flatten_draft_config(config)
    spec = load_spec(spec, registry)
    params = fusion_params(spec, registry)
    # The family's spec states its defaults; a value the checkpoint's config states wins over them here, so the
    # printed spec loads what the checkpoint says (the spec's own value stays the fallback).
    stated_by_config = {k: None for k in ("fc_norm", "norm_before_fc", "norm_before_residual", "norm_output")
                        if config_states(cfg, k)}
    values, notes = describe_facts(params.model_copy(update=stated_by_config), cfg)
    placed = None   # the names as the spec's rules name them: mapped only where the stored ones disagree (a pass
    for flag, pattern in SHOWN.items():   # over 10^5 names that assembling makes once already)
        present = any(re.search(pattern, n) for n in names)
        if values[flag] and not present:
            placed = canonical_names(spec, registry, cfg, names) if placed is None else placed
            present = any(re.search(pattern, n) for n in placed)
        if present != values[flag]:
            values[flag] = present
            notes = [n for n in notes if not n.startswith(f"{flag}:")]
            notes.append(f"{flag}: {str(present).lower()} (from the tensor names)")
    return values, notes


def canonical_names(spec: Spec, registry: Registry | None, cfg: Mapping[str, Any], names: Sequence[str]
                    ) -> list[str]:
    """``names`` as the spec's weight rules rename them (a family storing its per-aux norms as ``aux_norm.N``, with a
    rule to ``fc.aux_norm.N``); none where the rules do not build (said where the draft is loaded)."""
    from draftsmith.assembler.build import rule_set
    from draftsmith.errors import DraftsmithError
    from draftsmith.registry import default_registry

    try:
        rules = rule_set(spec, registry or default_registry(), cfg)
    except DraftsmithError:
        return []
    return [c for n in names for c in rules.to_parts(n)[0] or ()]   # every part a split rule makes


def final_norm_reading(spec: Spec, registry: Registry | None, config: Mapping[str, Any], names: Sequence[str],
                       draft: dict[str, Any], stated: str | None = None) -> str | None:
    """For a proposal whose fusion resolved ``norm_output: none`` (``draft``: its draft section, plain data, changed in
    place): a checkpoint without the final norm's weight (a Model-Optimizer draft exported with use_last_layernorm
    false) gets ``norms.final: false``, and the note to print is returned; one holding it beside a false
    use_last_layernorm is refused (:func:`~draftsmith.components.eagle3_config.held_norm_problem`), unless the spec
    the folder is read with states norm_output (``stated``, as a load takes it): then that value is proposed."""
    from draftsmith.assembler.config import flatten_draft_config
    from draftsmith.components.eagle3_config import FINAL_NORM, held_norm_problem
    from draftsmith.errors import SpecError

    if draft["fusion"].get("norm_output") != "none":
        return None
    cfg = flatten_draft_config(config)
    held = FINAL_NORM in canonical_names(spec, registry, cfg, names)
    if problem := held_norm_problem(cfg, held):
        if stated is None:
            raise SpecError("draft fusion", [problem])
        draft["fusion"]["norm_output"] = stated
        return f"norm_output: {stated} (the spec's; the draft config's {problem.path.rpartition(' ')[2]}: false)"
    if held or not draft["norms"].get("final", True):
        return None
    draft["norms"]["final"] = False
    return f"norms.final: false (norm_output none, and the checkpoint holds no final norm, {FINAL_NORM})"


def eagle3_notes(spec_name: str, config: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    return eagle3_values(spec_name, config, names)[1]


def condition_share(family: Family, config: Mapping[str, Any], names: Sequence[str],
                     seen: dict[str, bool] | None = None) -> float:
    """How far a row's conditions hold: the share of what it needs that is there (its required tensors, one of its
    config keys), halved for each thing it rules out that is there (a forbidden tensor, a config key that must not
    be). ``seen``: pattern -> whether some name matches, shared by the rows scored over one listing."""
    some = matcher(names, seen)
    needs = [some(p) for p in family.require] + ([any(k in config for k in family.config_any)]
                                                 if family.config_any else [])
    there = sum(some(p) for p in family.forbid) + sum(k in config for k in family.config_none)
    return (sum(needs) / len(needs) if needs else 1.0) / 2 ** there


def best_row(spec: str, config: Mapping[str, Any], names: Sequence[str]) -> Family:
    """The spec's detection row whose conditions hold best (the first of equals)."""
    rows = [f for f in FAMILIES if f.spec == spec]
    return max(rows, key=lambda f: (condition_share(f, config, names), -rows.index(f)))


def readable(pattern: str) -> str:
    """A detection regex written as a name: N = any layer, [x] = optional x, * = any part."""
    text = pattern.strip("^$").replace(r"\d+", "N").replace(r"\S+", "*").replace(r"\w+", "*")
    text = re.sub(r"\(([^()|]*)\)\?", lambda m: f"[{m.group(1)}]", text)
    return text.replace("\\", "")


def missing_required(spec: str, names: Sequence[str], config: Mapping[str, Any] | None = None) -> list[str]:
    """The tensors a family's best-fitting row requires that no name matches, written as names (N = any layer)."""
    family = best_row(spec, config or {}, names)
    return [readable(p) for p in family.require if not any(re.search(p, x) for x in names)]


def missing_keys(spec: str, names: Sequence[str], config: Mapping[str, Any] | None = None) -> list[str]:
    """The config keys of which a family's best-fitting row needs one and the config has none ([] when it has)."""
    config = config or {}
    family = best_row(spec, config, names)
    return [] if not family.config_any or any(k in config for k in family.config_any) else list(family.config_any)


def ruled_out(spec: str, names: Sequence[str], config: Mapping[str, Any] | None = None) -> list[str]:
    """What a family's best-fitting row rules out that is there: its forbidden tensors (as names, N = any layer),
    then its config keys that must not be present, as 'config key K'."""
    config = config or {}
    family = best_row(spec, config, names)
    out = [readable(p) for p in family.forbid if any(re.search(p, x) for x in names)]
    return out + [f"config key {k}" for k in family.config_none if k in config]


def full_model(names: Sequence[str]) -> bool:
    """Tensor names of a whole causal LM (a target): model.embed_tokens and model.layers.*, or a vision-language
    model's text model under model.language_model (the Hub's Qwen3-VL, transformers 5), and no fusion layer."""
    return (any(f"{p}embed_tokens.weight" in names and any(n.startswith(f"{p}layers.") for n in names)
                for p in ("model.", "model.language_model."))
            and not any(n.endswith("fc.weight") for n in names))


def draft_in(registry, config: Mapping[str, Any], names: Sequence[str]) -> LayoutMatch | None:
    """The draft layout a detector finds in a checkpoint that is no whole model (a target with its own MTP layers
    is detected as a draft too, and is a target), else None."""
    return None if full_model(names) else registry.detect_layout(config, names)


def swap_note(registry, folder: Any, config: Mapping[str, Any], names: Sequence[str], role: str) -> str | None:
    """For a load that failed: a note when the ``role`` ("target" or "draft") folder holds the other kind of
    checkpoint, which is what passing the two folders the wrong way round looks like."""
    folder = short_text(folder, 300)
    if role == "target" and (match := draft_in(registry, config, names)):
        return (f"note: {folder} looks like a draft ({short_text(match.reason, 300)}), not a target: are the target "
                "and draft folders swapped?")
    if role == "draft" and full_model(names) and registry.detect_layout(config, names) is None:
        return (f"note: {folder} looks like a whole model (model.embed_tokens, model.layers.*), not a draft: is it "
                "the target? (are the target and draft folders swapped?)")
    return None
