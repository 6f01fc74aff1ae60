"""Spec + configs -> target and draft modules on the meta device (no tensor is allocated here)."""
from __future__ import annotations

import copy
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Callable

import torch
from torch import nn

from draftsmith.assembler.config import (draft_error, flatten_draft_config, has_recurrent_layers, is_mla,
                                        target_hidden_width, text_config, unread_eps)
from draftsmith.assembler.models import CausalLM, DraftModel
from draftsmith.assembler.parts import LayerRecipe, Stacker, continued_moe, target_recipe, target_scales
from draftsmith.components.dims import Dims
from draftsmith.components.eagle3_config import FINAL_NORM, held_norm_problem
from draftsmith.components.gqa import config_qkv_bias, held_qkv_bias, stated_qkv_bias
from draftsmith.components.layers import own_input
from draftsmith.components.quant_models import quantize_target
from draftsmith.components.rule_config import UnboundRules, bind_all, has_placeholders
from draftsmith.components.sliding import stated_window
from draftsmith.components.targets import UnsupportedTarget, apply_windows, config_path
from draftsmith.components.weights import RuleSet
from draftsmith.errors import Problem, SpecError, short, short_list, short_text
from draftsmith.registry import Registry
from draftsmith.registry.loading import BUILTIN
from draftsmith.specs.draft_rules import final_norm_problem, hidden_norm_problem, shared_head_problem
from draftsmith.specs.resolve import fusion_params, params_problems, resolve
from draftsmith.specs.schema import Spec

_LAYER = re.compile(r"^layers\.(\d+)\.")
HELD = {True: "q/k/v bias tensors", False: "no q/k/v bias tensor"}
log = logging.getLogger("draftsmith")


def build_target(cfg, registry: Registry, backend: Callable, arch: Any = None) -> CausalLM:
    """The target's model on meta; ``arch``: its type's record (``registry.build("target", model_type)``), where the
    caller built it already (plan_target reads its renames too: the factory runs once a load)."""
    arch = registry.build("target", cfg.model_type) if arch is None else arch
    arch.check(cfg)  # UnsupportedTarget: a config this code would misread (e.g. an MoE router option)
    dims = Dims.from_config(cfg)
    # mixture-of-experts layers: the type's moe recipe (TARGETS; a plugin's target may have no moe_layers)
    sparse = set(arch.moe_layers(cfg)) if callable(getattr(arch, "moe_layers", None)) else set()
    stack = Stacker(registry, target_recipe(arch, bool(sparse)), dims, backend)
    with torch.device("meta"):
        layers = [stack.layer(i, in_width=dims.hidden, sparse=i in sparse) for i in range(dims.layers)]
        apply_windows(cfg, layers, arch)  # as the type reads sliding_window (Llama: ignored, as transformers)
        model = CausalLM(dims, layers, stack.norm(dims.hidden), bool(getattr(cfg, "tie_word_embeddings", False)),
                         recurrent=arch.recurrent or has_recurrent_layers(cfg),  # the type's, or its layer_types'
                         **target_scales(arch, cfg))
        try:
            quantize_target(model, cfg)  # from the target's own quantization_config only (invariant 26)
        except UnsupportedTarget as e:   # said naming the file, as TargetArch.check's refusals are
            raise UnsupportedTarget(f"{config_path(cfg)}: {e}") from None
    return model


def rule_set(spec: Spec, registry: Registry, config: Mapping[str, Any] | None = None) -> RuleSet:
    """The spec's weight rules; with the draft's config, ``${key}`` placeholders are bound to its values (in the
    built-in regex and split rules: a plugin rule's params holding one are refused, as it would get them as
    written and match nothing)."""
    placed = []
    for i, r in enumerate(spec.weights.rules):
        if ("weight_rule", r.kind) not in registry.components:   # an unknown kind: build() names it below
            continue
        if (plugin := registry.provider("weight_rule", r.kind)) == BUILTIN:
            continue
        placed += [Problem(f"weights.rules.{i}", f"{short(v)}: a ${{key}} placeholder in a param of plugin rule kind "
                           f"{short(r.kind)} (plugin {plugin!r}), which would get it as written: draftsmith binds "
                           "placeholders in the built-in regex and split rules only",
                           hint="Write the value, or use a regex rule for the part that needs the config's value.")
                   for v in (r.model_extra or {}).values() if isinstance(v, str) and has_placeholders(v)]
    if placed:
        raise spec.error(kind=UnboundRules, problems=placed)
    rules = [registry.build("weight_rule", r.kind, resolve(registry, "weight_rule", r.kind, r.model_extra or {})[1])
             for r in spec.weights.rules]
    ignore = list(spec.weights.ignore)
    if config is not None:
        try:
            rules, ignore = bind_all(rules, ignore, config)
        except UnboundRules as e:   # the rule's dotted path, in the spec file the user wrote
            raise spec.error(kind=UnboundRules, problems=e.problems) from None
    return RuleSet(rules, ignore, where=lambda: _rule_lines(spec))


def _rule_lines(spec: Spec) -> dict[int, str]:
    """Where the spec's text writes each weight rule, as its problems are placed (:meth:`Spec.places`)."""
    said = spec.places([f"weights.rules.{i}" for i in range(len(spec.weights.rules))])
    return {int(path.rpartition(".")[2]): at for path, at in said.items()}


def layer_count(spec: Spec, canonical_names: Iterable[str], source: tuple[Any, list[str]] | None = None) -> int:
    """The draft's layer count: the spec's num_layers, or for ``auto`` the checkpoint's (:func:`held_layers`)."""
    return spec.draft.num_layers if spec.draft.num_layers != "auto" else held_layers(spec, canonical_names, source)


SAMPLE = 4   # checkpoint names shown before and after the rules when auto finds no layer


def no_layers(canonical: list[str], source: tuple[Any, list[str]] | None) -> Problem:
    """Why auto found no 'layers.N.' name, with what the rules were given and made of it (a few names of each, how
    many collided onto one name, how many were ignored): a rule that matches nothing, or maps every name to one,
    shows in them. ``source``: (the draft folder, its tensor names before the rules), when known."""
    def sample(names: list[str]) -> str:
        return short_list(names, SAMPLE, 40) if names else "none"

    message, ignored = "auto found no 'layers.N.' tensors after the weight rules", 0
    if source is not None:
        folder, names = source
        message += f": draft folder {short_text(folder, 120)} holds {len(names)} tensors ({sample(names)})"
        ignored = len(names) - len(canonical)
    shared = [n for n in Counter(canonical).values() if n > 1]   # how many names each collided name got
    fate = [f"{sum(shared)} names collided onto {len(shared)}"] * bool(shared) + (
        [f"{ignored} ignored by weights.ignore"] * bool(ignored))
    fate_text = f" ({'; '.join(fate)})" if fate else ""
    return Problem("draft.num_layers", message, hint=(
        f"After the rules: {sample(list(dict.fromkeys(canonical)))}{fate_text}. Check weights.rules: a rule's match "
        f"must fit these names, and its replace give 'layers.N.' names ({layer_rule_example(source)})"))


def layer_rule_example(source: tuple[Any, list[str]] | None) -> str:
    """A rule that makes 'layers.N.' of the checkpoint's own numbered names (``model.decoder.layers.0.*``: match
    '^model\\.decoder\\.layers\\.', replace 'layers.'), else of a midlayer.* draft's."""
    for name in source[1] if source is not None else ():
        if (m := _NUMBERED.match(name)) is not None:
            return f"here e.g. match: '^{re.escape(m.group(1))}', replace: 'layers.'"
    return "e.g. match: '^midlayer\\.', replace: 'layers.0.'"


# dotted words, a layer number, then a module and its tensor (fc_norm.0.weight is no layer's: nothing between)
_NUMBERED = re.compile(r"^((?:[A-Za-z_][\w-]*\.)+)\d+\.[\w-]+\.")


def held_layers(spec: Spec, canonical_names: Iterable[str], source: tuple[Any, list[str]] | None = None) -> int:
    """The layers the checkpoint holds: the highest 'layers.N.' of its canonical names, plus one; a SpecError at
    the spec's draft.num_layers when there is none (:func:`no_layers`, with ``source``) or N is past
    limits.DRAFT_LAYERS."""
    canonical_names = list(canonical_names)
    # the highest 'layers.N.' by its digits (never int() of an unbounded run: Python refuses past 4300 digits)
    numbered = [(len(run := m.group(1).lstrip("0")), run, n) for n in canonical_names if (m := _LAYER.match(n))]
    if not numbered:
        raise spec.error([no_layers(canonical_names, source)])
    from draftsmith import limits

    digits, run, name = max(numbered)
    if digits > len(str(limits.DRAFT_LAYERS)) or int(run or "0") >= limits.DRAFT_LAYERS:  # before anything is built
        layer = run if digits <= 20 else f"<a number of {digits} digits>"
        raise spec.error([Problem(
            "draft.num_layers", f"auto found tensor {short(name)} of layer {layer}; a draft has at most "
                                f"{limits.DRAFT_LAYERS} layers (draftsmith/limits.py)")])
    return int(run or "0") + 1


def reduced_reason(spec: Spec, draft_raw: Mapping[str, Any], names: Iterable[str], target_vocab: int) -> str | None:
    """What makes the draft's vocabulary reduced (``vocab.reduced``; auto: d2t among its tensors or a config's
    draft_vocab_size below the target's vocabulary), or None where it is not."""
    if spec.draft.vocab.reduced != "auto":
        return "draft.vocab.reduced: true" if spec.draft.vocab.reduced else None
    vd = draft_raw.get("draft_vocab_size")
    if vd is not None and vd < target_vocab:
        return f"its config's draft_vocab_size {vd} is below the target's {target_vocab} ids"
    return "the draft holds d2t" if "d2t" in set(names) else None


def topk_problems(spec: Spec, vocab: int) -> list[Problem]:
    """The spec's ``decoding.topk`` past the draft's vocabulary (``vocab``: its d2t's length, else the target's): a
    spec past it loaded and then refused every call as if the caller had passed that topk."""
    topk = spec.decoding.topk
    return [Problem("decoding.topk", f"{topk} candidates per node, but the draft's vocabulary has {vocab} tokens",
                    found=topk, allowed=f"1..{vocab}")] if topk > vocab else []


def held_d2t_rows(rules: RuleSet, infos: Mapping[str, Any]) -> int | None:
    """The length of the d2t a checkpoint holds (its header's shape, through the spec's rules), or None where it
    holds none or none of one dimension: a reduced head's size where the config states no draft_vocab_size."""
    shapes = [tuple(info.shape) for name, info in infos.items() if rules.to_parts(name)[0] == ("d2t",)]
    return shapes[0][0] if len(shapes) == 1 and len(shapes[0]) == 1 and shapes[0][0] >= 1 else None


def attention_name(spec: Spec, draft_raw: Mapping[str, Any]) -> str:
    kind = spec.draft.attention.kind
    return ("mla" if is_mla(flatten_draft_config(draft_raw)) else "gqa") if kind == "auto" else kind


def attention_recipe(spec: Spec, registry: Registry, draft_raw: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(name, params) of the draft's attention; for ``auto``, its params checked against the kind this checkpoint
    gets (a SpecError at draft.attention naming the choice: load_spec could only check them against either)."""
    name, params = attention_name(spec, draft_raw), spec.draft.attention.params
    if spec.draft.attention.kind == "auto":
        comp = registry.get("attention", name)
        if problems := params_problems(comp.params, params, "draft.attention"):
            why = "has" if name == "mla" else "has no"
            raise spec.error([replace(p, message=f"{p.message} (kind auto is {name} for this draft: its "
                                               f"config {why} MLA fields)") for p in problems])
    return name, params


def owns_embedding(spec: Spec, hidden: int, target_hidden: int) -> bool:
    """Whether the draft embeds tokens with its own table (``share.embed``: own; own_if_different when its width
    differs from the target's). A table or head shared with a target of another width is a SpecError naming the
    field (it assembled, then failed in the draft's first norm or matmul)."""
    share = spec.draft.share
    own = share.embed == "own" or (share.embed == "own_if_different" and hidden != target_hidden)
    shared = ([] if own else ["embed"]) + (["lm_head"] if share.lm_head == "target" else [])
    if hidden != target_hidden and shared:
        fix = {"embed": "own or own_if_different (and the checkpoint's embed_tokens.weight not ignored)",
               "lm_head": "draft (the draft's own lm_head.weight)"}
        raise spec.error([Problem(f"draft.share.{what}", f"target: the target's is {target_hidden} wide "
                                  f"and the draft's hidden size {hidden}; a draft of another width than "
                                  "its target cannot share it", found="target", allowed=fix[what])
                          for what in shared])
    return own


def hidden_norm_slot(spec: Spec, fc: nn.Module) -> bool:
    """Whether the first layer's hidden_norm slot is filled: the spec's ``norms.hidden``, auto = the fusion's
    ``has_hidden_norm`` (a fusion whose first layer reads the fused state alone has no such slot to fill)."""
    want = spec.draft.norms.hidden
    return getattr(fc, "has_hidden_norm", False) if want == "auto" else want


def norm_problems(spec: Spec, fc: nn.Module, draft_raw: Mapping[str, Any] | None = None,
                  names: Iterable[str] = ()) -> list[Problem]:
    """The draft's norm settings against its built fusion (a plugin fusion's slots, a norm_output its config
    states): a hidden norm asked of a fusion without the slot; no final norm where post-norm feedback (
    ``draft.feed_back: post_norm``, or the fusion's resolved ``norm_output: feed_back``, either one: an EAGLE 3.1
    config upgrades a spec's pre_norm) feeds its output back, which would silently be the pre-norm state; a
    norm.weight among the canonical ``names`` that a false use_last_layernorm in ``draft_raw`` would leave unapplied
    where the spec does not state norm_output (:func:`~draftsmith.components.eagle3_config.held_norm_problem`)."""
    d, out = spec.draft, []
    if fc.norm_output == "none" and d.fusion.params.get("norm_output", "auto") == "auto" and (
            held := held_norm_problem(draft_raw or {}, FINAL_NORM in names)):
        out.append(held)
    if d.norms.hidden is True and not getattr(fc, "has_hidden_norm", False):
        out.append(hidden_norm_problem(d.fusion.kind))
    asks = (["draft.feed_back: post_norm"] if d.feed_back == "post_norm" else []) + (
        [f"{'the spec' if d.fusion.params.get('norm_output') == 'feed_back' else 'the draft config'}'s norm_output, "
         "read as feed_back"] if fc.norm_output == "feed_back" else [])   # a fusion's field (hooks.kinds)
    if asks and not d.norms.final:
        out.append(final_norm_problem(asks))
    return out


def unstated_qkv_bias(registry: Registry, attention: tuple[str, dict[str, Any]], flat: Mapping[str, Any],
                      names: Iterable[str]) -> bool | None:
    """For a draft whose attention reads ``qkv_bias: auto`` and whose config states neither qkv_bias nor
    attention_bias: whether the checkpoint's tensors (``names``, canonical) hold q/k/v biases, as their author
    trained it (model_type qwen2 drafts hold them as EAGLE's Qwen2 drafts, or none as SpecForge's EAGLE-3 ones;
    engines build them by a key the configs do not state); None otherwise."""
    name, params = attention
    if ("qkv_bias" not in getattr(registry.get("attention", name).params, "model_fields", {})
            or params.get("qkv_bias", "auto") != "auto" or stated_qkv_bias(flat) is not None):
        return None
    return held_qkv_bias(names)


def qkv_bias_reading(attention: tuple[str, dict[str, Any]], draft_raw: Mapping[str, Any]) -> str:
    """Why the draft's attention has q/k/v biases or not, for a load whose bias tensors do not fit: the spec's field
    or the config's key (with neither, the checkpoint's tensors decide, :func:`unstated_qkv_bias`)."""
    key = getattr(draft_raw, "key", str)
    if (stated := attention[1].get("qkv_bias", "auto")) != "auto":
        return f"the spec's draft.attention.qkv_bias is {str(stated).lower()}"
    if (found := stated_qkv_bias(flatten_draft_config(draft_raw))) is not None:
        return f"qkv_bias auto read the draft config's {key(found[0])}: {short(found[1])}"
    return (f"qkv_bias auto: the draft config states neither {key('qkv_bias')} nor {key('attention_bias')}: the "
            "checkpoint's tensors decide")


def draft_config(registry: Registry, attention: tuple[str, dict[str, Any]], draft_raw: Mapping[str, Any],
                 draft_cfg, names: Iterable[str] = (), target_hidden: int | None = None
                 ) -> tuple[Any, Dims, list[str]]:
    """The draft's transformers config as its layers read it, its Dims, and what it takes that its config.json
    does not state, one note each (build_draft says them once, on one line): a config read as Llama's that states no
    q/k/v-bias key gets what the checkpoint's tensors (``names``) hold; the sizes Dims defaults (Dims.unstated); a
    sliding window it asks for, which the draft does not apply; and what it states that the draft does not take (a
    logit_scale; a target_hidden_size that is not ``target_hidden``, the target's; a draft_vocab_size above the
    target's vocabulary, vocab.config_contradictions says with the tensors' shapes, as inspect says them)."""
    flat = flatten_draft_config(draft_raw)
    key = getattr(draft_raw, "key", str)   # a params.json's own key names
    notes = []
    held = unstated_qkv_bias(registry, attention, flat, names)
    if held is not None and held != config_qkv_bias(draft_cfg):
        draft_cfg = copy.copy(draft_cfg)
        draft_cfg.qkv_bias = held
        notes.append(f"{key('qkv_bias')} not stated (nor {key('attention_bias')}): {str(held).lower()} taken: the "
                     f"checkpoint holds {HELD[held]}; state draft.attention.qkv_bias to override it")
    dims = Dims.from_config(draft_cfg)
    notes += dims.unstated(flat, key, heads=not is_mla(flat),   # latent attention: its own
                           hints={"rms_norm_eps": unread_eps(flat, draft_raw)} if flat.get("rms_norm_eps") is None
                           else None)
    if (window := stated_window(flat)) is not None:
        # not the target's path (TargetArch.window): that reads layer_types as the model_type's config class computes
        # them from num_hidden_layers, which a draft's config misstates (FORMATS.md), and drafts are Llama layers
        on = f" with {key('use_sliding_window')} true" if flat.get("use_sliding_window") else ""
        notes.append(f"{key('sliding_window')}={window}{on} is not applied: the draft attends its whole context (a "
                     "draft's config is read as Llama's, whose attention has no window)")
    if isinstance(scale := flat.get("logit_scale"), (int, float)) and scale != 1:
        notes.append(f"{key('logit_scale')}={scale!r} is not applied: the draft's logits are its head's (vLLM scales "
                     "them, so its tree ranks and sampled drafts differ; the output is the target's either way)")
    made_for = flat.get("target_hidden_size")
    if isinstance(made_for, int) and target_hidden is not None and made_for != target_hidden:
        notes.append(f"{key('target_hidden_size')}={made_for} is not the target's hidden_size {target_hidden}: the "
                     "draft reads the target it is given (engines size its fc by this key: is the draft made for "
                     "this target?)")
    return draft_cfg, dims, notes


def build_draft(spec: Spec, registry: Registry, *, draft_raw: Mapping[str, Any], draft_cfg, target_cfg,
                canonical_names: list[str], backend: Callable, source: tuple[Any, list[str]] | None = None,
                defer: bool = False, d2t_rows: int | None = None) -> DraftModel:
    """The draft on the meta device. ``source``: (the draft folder, its tensor names before the rules), for the
    error of a ``num_layers: auto`` that finds no layer. ``d2t_rows``: the length of the d2t the checkpoint holds
    (:func:`held_d2t_rows`), a reduced vocabulary's size where the config states no draft_vocab_size (else the
    target's vocabulary, which such a d2t would not fit). A fusion's SpecError that carries the module it built
    anyway (``built``: the problem is in values no tensor's shape depends on, such as EAGLE-3 tap ids out of range)
    is raised with the problems the build finds after it, or, where the build succeeds, at its end; ``defer``: kept
    on the model instead (``deferred_problems``), for a caller that checks the tensors first and says both."""
    d = spec.draft
    attention = attention_recipe(spec, registry, draft_raw)
    draft_cfg, dims, notes = draft_config(registry, attention, draft_raw, draft_cfg, canonical_names,
                                          getattr(target_cfg, "hidden_size", None))
    if notes:   # once per draft build, on one line, where the user sees it
        log.warning("draft %s: %s", short_text(getattr(draft_raw, "file", "config"), 300), "; ".join(notes))
    params = fusion_params(spec, registry)
    sparse_mlp, sparse_dims, moe_of = continued_moe(spec, registry, target_cfg, dims.hidden)
    recipe = LayerRecipe(layer=(d.layer.kind, d.layer.params), attention=attention,
                         mlp=(d.mlp.kind, d.mlp.params), norm=(d.norm.kind, d.norm.params), sparse_mlp=sparse_mlp)
    stack = Stacker(registry, recipe, dims, backend, sparse_dims)
    target_vocab = target_cfg.vocab_size
    reduced = reduced_reason(spec, draft_raw, canonical_names, target_vocab)
    vd = int(draft_raw.get("draft_vocab_size") or d2t_rows or target_vocab) if reduced else None
    problems = [shared_head_problem(reduced)] if reduced and d.share.lm_head == "target" else []
    aside = topk_problems(spec, vd or target_vocab)   # no shape depends on it: the tensors are checked too
    with torch.device("meta"):
        try:
            fc = registry.build("fusion", d.fusion.kind, params, hidden=dims.hidden,
                                target_width=target_hidden_width(target_cfg), draft_config=dict(draft_raw),
                                target_layers=target_cfg.num_hidden_layers, norm=stack.norm)
            deferred = []
        except SpecError as e:  # the fusion knows the rule; the error names the spec file (its config's: draft_error)
            fc = getattr(e, "built", None)   # draftsmith's own fusion's only: a plugin's may wrap it, adding more
            if not isinstance(fc, nn.Module) or registry.provider("fusion", d.fusion.kind) != BUILTIN:
                raise draft_error(spec, draft_raw, [*e.problems, *problems, *aside]) from None
            deferred = list(e.problems)   # the module it built anyway (the same shapes): the tensors are checked too
        deferred += aside
        # every one the checkpoint decides, at once
        if problems := deferred + problems + norm_problems(spec, fc, draft_raw, canonical_names):
            if len(problems) > len(deferred):
                raise draft_error(spec, draft_raw, problems)
        try:
            hidden_norm = hidden_norm_slot(spec, fc)
            layers, count = [], layer_count(spec, canonical_names, source)
            sparse = moe_of(count)   # draft.moe: as_target: the layers the target's type makes MoE at L + i
            for i in range(count):
                first = i == 0
                layers.append(stack.layer(
                    i, in_width=dims.hidden * (fc.first_in_factor if first else 1),
                    input_norm=d.norms.input == "all" or (d.norms.input == "not_first" and not first),
                    hidden_norm=first and hidden_norm, mix=fc.first_mix if first else own_input,
                    norm_before_residual=first and fc.norm_before_residual, sparse=i in sparse))
            head = nn.Linear(dims.hidden, vd or target_vocab, bias=False) if d.share.lm_head == "draft" else None
            model = DraftModel(fc, layers, stack.norm(dims.hidden) if d.norms.final else None, lm_head=head,
                               draft_vocab=vd, target_vocab=target_vocab, head_norm=fc.norm_output != "none",
                               feed_post_norm=d.feed_back == "post_norm" or fc.norm_output == "feed_back")
            if owns_embedding(spec, dims.hidden, text_config(target_cfg).hidden_size):
                model.embed_tokens = nn.Embedding(target_vocab, dims.hidden)
            elif d.share.embed == "own_if_different":   # the target's table: a same-width draft's is its frozen copy
                model.copies = ("embed_tokens.weight",)
        except SpecError as e:   # what the build meets past the fusion (auto's layer count) is said with what
            if not deferred:     # it set aside, not in its place
                raise
            raise draft_error(spec, draft_raw, [*deferred, *e.problems]) from None
        _, quant_params = resolve(registry, "quant", spec.quant.method, spec.quant.model_extra or {})
        try:   # the draft's own spec section only, never the target's config
            registry.build("quant", spec.quant.method, quant_params, module=model)
        except SpecError as e:   # the method knows the rule; the error names the spec file the user wrote
            raise spec.error([*deferred, *e.problems]) from None
    if deferred and not defer:
        raise draft_error(spec, draft_raw, deferred)
    model.deferred_problems = tuple(deferred)
    return model
