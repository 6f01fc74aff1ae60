"""Load notes that name the spec field a misfit comes from, for fields whose tensors the checkpoint holds under
other shapes or names: the fusion's tap count (fc.weight's width), the draft's own head or embedding (draft.share),
an attention that is not MLA's on an MLA checkpoint (draft.attention.kind), q/k/v biases, per-head q/k norms and
the fusion's bias held on one side only (draft.attention.qkv_bias / qk_norm, fusion.bias), and the norm and
vocabulary fields that, set otherwise, fit every name (flip_note). Each is a callable that
:func:`draftsmith.assembler.explain.explained` asks only when a load fails; None where it has nothing to say."""
from __future__ import annotations

import itertools
import re
from typing import Callable

from draftsmith.assembler.build import attention_recipe, qkv_bias_reading
from draftsmith.assembler.config_values import MLA_KEYS
from draftsmith.assembler.names import module_of, one_pattern
from draftsmith.components.gqa import QKV_BIAS
from draftsmith.components.weights import RuleSet
from draftsmith.registry import Registry
from draftsmith.specs.schema import Spec


def fc_shape_note(rules: RuleSet, infos: dict, built: dict) -> Callable[[], str | None]:
    """The note for a draft whose fusion's fc.weight is of another shape in the checkpoint: the fusion says what
    that shape means (a fusion with a ``shape_note``, as eagle3's: another count of the target's hidden states)."""
    def note() -> str | None:
        says = getattr(getattr(built.get("draft"), "fc", None), "shape_note", None)
        held = next((info.shape for n, info in infos.items() if rules.to_canonical(n)[0] == "fc.weight"), None)
        return says(tuple(held)) if callable(says) and held is not None else None
    return note


MLA_NAMES = re.compile(r"(^|\.)self_attn\.(q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj)\.weight$")
GQA_NAMES = re.compile(r"(^|\.)self_attn\.[kv]_proj\.weight$")


def mla_note(spec: Spec, draft_raw, canonical: list[str], built: dict) -> Callable[[], str | None]:
    """The note for a draft loaded with a stated attention other than mla whose k/v projections are missing while
    the checkpoint holds MLA's (kv_b_proj, ...) and its config every MLA field: the field that decides, where the
    hints could only pair names of two attentions."""
    def note() -> str | None:
        kind = spec.draft.attention.kind
        if kind in ("auto", "mla") or "draft" not in built or not all(draft_raw.get(k) is not None for k in
                                                                       ("kv_lora_rank", "qk_rope_head_dim")):
            return None
        held = set(canonical)
        wanted = [n for n in built["draft"].state_dict() if GQA_NAMES.search(n) and n not in held]
        if not wanted or not any(MLA_NAMES.search(n) for n in canonical):
            return None
        fields = [k for k in MLA_KEYS if draft_raw.get(k) is not None]
        return (f"note: the draft's config has MLA fields ({', '.join(fields)}) and the checkpoint MLA's projections, "
                f"and the spec's draft.attention.kind is {kind!r}: state mla, or auto (mla where the config has MLA "
                "fields)")
    return note


def share_note(spec: Spec, rules: RuleSet, infos: dict, canonical: list[str], built: dict) -> Callable[[], str | None]:
    """The note for a draft built with its own embedding or head (``draft.share``) that the checkpoint does not
    hold, or that weights.ignore drops: the field that decides, and the value that takes the target's. Nothing
    where a tensor of that shape no rule placed is there (a head under another name: the load's hint names it)."""
    def note() -> str | None:
        if "draft" not in built:
            return None
        state, share, said = built["draft"].state_dict(), spec.draft.share, []
        held = set(canonical)
        for field, name, value in (("embed", "embed_tokens.weight", share.embed),
                                   ("lm_head", "lm_head.weight", share.lm_head)):
            if name not in state or value == "target" or name in held:
                continue
            shape = tuple(state[name].shape)
            if any(tuple(info.shape) == shape and not rules.is_ignored(n) and rules.to_canonical(n)[0] not in state
                   for n, info in infos.items()):
                continue   # under another name: a rule is missing, not the field wrong
            dropped = [n for n in infos if rules.is_ignored(n) and module_of(n) == module_of(name)]
            why = f"weights.ignore drops ({dropped[0]})" if dropped else "the checkpoint does not hold"
            fix = (f"share.{field}: target takes the target's" if field == "embed" or "d2t" not in state else
                   "a reduced vocabulary (d2t) needs the draft's own head: the checkpoint is incomplete")
            said.append(f"the spec's draft.share.{field} is {value}, so the draft reads its own {name}, which "
                        f"{why}: {fix}")
        return "note: " + "; ".join(said) if said else None
    return note


# Fields that decide which tensors a draft holds, with no note of their own (qk_norm, qkv_bias, the fusion's bias,
# num_layers and share have theirs): a load that fails on names is told which one, changed, fits them all
FLIPS = ("draft.norms.final", "draft.norms.input", "draft.norms.hidden", "draft.fusion.fc_norm",
         "draft.fusion.norm_before_fc", "draft.vocab.reduced")


def flip_note(spec: Spec, registry, rebuild: Callable, canonical: list[str], built: dict,
              shapes: dict | None = None) -> Callable[[], str | None]:
    """The note for a draft whose tensor names misfit where one of :data:`FLIPS` or of the draft's quant readings
    (:func:`quant_readings`) set otherwise builds a draft they all fit (``rebuild(spec)``: the draft that spec builds
    on meta): 'norm.weight' unexpected under ``norms.final: false``, the fc_norm.N weights missing under ``fc_norm:
    true``, an FP8 draft's scales under ``quant: none``. ``shapes``: the shape of each canonical name one tensor
    holds, which a reading's model must take too (a block FP8 draft's weight_scale names fit scheme: tensor, their
    [1, 1] shapes do not). Each such field and value is said."""
    from draftsmith.assembler.load import optional_and_unused
    from draftsmith.assembler.plan import expected_of
    from draftsmith.errors import DraftsmithError
    from draftsmith.specs.edits import changed_spec, current_value, field_info, spec_data, yaml_value

    held = set(canonical)

    def misfit(model) -> bool:
        wanted, (optional, unused) = expected_of(model), optional_and_unused(model)
        expected = set(wanted)
        return bool(expected - held - optional or held - expected - unused) or any(
            shape != wanted[c].shape and shape not in wanted[c].also for c, shape in (shapes or {}).items()
            if c in wanted)

    def readings():   # (path, the spec's now, its values): FLIPS, then the draft's quant
        data = spec_data(spec)
        for path in FLIPS:
            if (info := field_info(data, path, registry)) is not None:
                yield path, current_value(data, path, info), [(v, [(yaml_value(v), path, v)]) for v in info.values]
        yield from quant_readings(spec, registry)

    def fitting(tries) -> str | None:   # the first of a value's (said, section, change) tries that fits, said
        for shown, section, change in tries:
            try:
                if not misfit(rebuild(changed_spec(spec, [(section, change)], registry))):
                    return shown
            except DraftsmithError:   # that reading does not build this draft: no reading to offer
                continue
        return None

    def note() -> str | None:   # two checkpoint names on one canonical name: no field's value mends a collision
        if "draft" not in built or len(held) < len(canonical) or not misfit(built["draft"]):
            return None
        said = []
        for path, now, values in readings():
            fits = [shown for value, tries in values if value != now and (shown := fitting(tries)) is not None]
            if fits:
                stated = "auto, the draft config's" if now is None else yaml_value(now)
                said.append(f"{path}: {' or '.join(fits)} (the spec: {stated})")
        return f"note: the checkpoint's tensors fit the draft with {'; or '.join(said)}" if said else None
    return note


def quant_readings(spec: Spec, registry):
    """(path, the spec's now, [(value, [(said, section, change)])]) of the draft's quant: its method among the
    registered ones (the whole section replaced: fp8's params are no other method's), each tried with its defaults,
    then with its choice fields set otherwise, fewest first (a per-tensor FP8 draft under ``quant: none`` is told
    ``fp8 with scheme: tensor``); and each choice field of the spec's method's params (fp8's scheme, activation,
    block_scale), from the params model."""
    from draftsmith.specs.edits import yaml_value

    method, given = spec.quant.method, spec.quant.model_extra or {}
    methods = [name for kind, name in registry.components if kind == "quant"]
    yield "quant.method", method, [(m, [(shown, "quant", {"method": m, **params})
                                        for shown, params in _method_tries(registry, m)]) for m in methods]
    for name, (values, default) in _choices(registry, method).items():
        yield (f"quant.{name}", given.get(name, default),
               [(v, [(yaml_value(v), f"quant.{name}", v)]) for v in values])


def _choices(registry, method: str) -> dict[str, tuple[list, object]]:
    """Each choice field of quant ``method``'s params: (its values, its default)."""
    from draftsmith.specs.edits import leaf_values

    comp = registry.components.get(("quant", method))
    fields = comp.record.params.model_fields.items() if comp is not None else ()
    return {name: (values, info.default) for name, info in fields if (values := leaf_values(info.annotation))}


def _method_tries(registry, method: str) -> list[tuple[str, dict]]:
    """(said, params) of quant ``method``: its defaults, then each other setting of its choice fields, fewest
    changed first."""
    from draftsmith.specs.edits import yaml_value

    choices = _choices(registry, method)
    settings = itertools.product(*[[(name, v) for v in values] for name, (values, _) in choices.items()])
    changed = sorted(([(n, v) for n, v in s if v != choices[n][1]] for s in settings), key=len)
    return [(" with ".join(filter(None, [yaml_value(method), ", ".join(f"{n}: {yaml_value(v)}" for n, v in c)])),
             dict(c)) for c in changed]


def qkv_bias_note(spec: Spec, registry: Registry, draft_raw, canonical: list[str],
                  built: dict) -> Callable[[], str | None]:
    """The note for a draft whose q/k/v bias tensors do not fit: the checkpoint holds them and the attention was
    built without, or the reverse; it says why the attention has them or not and which spec field decides."""
    def note() -> str | None:
        attention = with_field(spec, registry, draft_raw, "qkv_bias")
        if attention is None or (found := unfit(QKV_BIAS, canonical, built)) is None:
            return None
        why = qkv_bias_reading(attention, draft_raw)
        return attention_field_note("q/k/v biases", "qkv_bias", *found[:2], why=f" ({why})")
    return note


QK_NORM = re.compile(r"(^|\.)self_attn\.[qk]_norm\.weight$")
ATTN_NORM = re.compile(r"(^|\.)self_attn\.\w*norm\w*\.weight$")   # q/k norms under any name


def qk_norm_note(spec: Spec, registry: Registry, draft_raw, canonical: list[str],
                 built: dict) -> Callable[[], str | None]:
    """The note for a draft whose per-head q/k norms (Qwen3-style ``q_norm`` / ``k_norm``) do not fit: the checkpoint
    holds them and the attention was built without, or the reverse, where the attention has a ``qk_norm`` field."""
    def note() -> str | None:
        if (found := unfit(QK_NORM, canonical, built)) is None:
            return None
        held, wanted, state = found
        if not held and any(ATTN_NORM.search(n) and n not in state for n in canonical):
            return None   # norms under another name (q_layernorm): a rule is missing, not the field wrong
        if with_field(spec, registry, draft_raw, "qk_norm") is None:
            return None
        return attention_field_note("per-head q/k norms", "qk_norm", held, wanted)
    return note


def unfit(pattern: re.Pattern, canonical: list[str], built: dict) -> tuple[list[str], list[str], dict] | None:
    """(the checkpoint's names matching ``pattern``, the built draft's, the built draft's state dict) where one side
    has such names and the other none, else None (also before the draft is built)."""
    if "draft" not in built:
        return None
    state = built["draft"].state_dict()
    held = sorted(n for n in canonical if pattern.search(n))
    wanted = sorted(n for n in state if pattern.search(n))
    return None if bool(held) == bool(wanted) else (held, wanted, state)


def attention_field_note(what: str, field: str, held: list[str], wanted: list[str], why: str = "") -> str:
    """The note naming ``draft.attention.FIELD`` and the value that fits the checkpoint's ``held`` names."""
    if held:
        return (f"note: the checkpoint holds {what} ({one_pattern(held)}) and the draft's attention is built without "
                f"them{why}: state draft.attention.{field}: true")
    return (f"note: the draft's attention expects {what} ({one_pattern(wanted)}) that the checkpoint does not "
            f"hold{why}: state draft.attention.{field}: false")


def fc_bias_note(canonical: list[str], built: dict) -> Callable[[], str | None]:
    """The note for a draft whose fusion bias does not fit the checkpoint's fc.bias: the fusion says why it has one
    or not (a fusion with a ``bias_note``, as eagle1's). None where fc.weight itself is not read (the fusion under
    another name, fusion.linear.*: its bias is there too, and 'state fusion.bias: false' was wrong advice)."""
    def note() -> str | None:
        says = getattr(getattr(built.get("draft"), "fc", None), "bias_note", None)
        return says("fc.bias" in canonical) if callable(says) and "fc.weight" in canonical else None
    return note


def with_field(spec: Spec, registry: Registry, draft_raw, field: str) -> tuple[str, dict] | None:
    """The attention recipe the spec builds for this draft where its params have ``field``, else None: an attention
    without the field (MLA has no qkv_bias) gets no note naming it."""
    attention = attention_recipe(spec, registry, draft_raw)
    return attention if field in getattr(registry.get("attention", attention[0]).params, "model_fields", {}) else None


MLP_ROWS = re.compile(r"(^|\.)mlp\.(gate_proj|up_proj)\.weight$")


def mlp_size_note(draft_raw, infos: dict) -> Callable[[], str | None]:
    """The note for a draft whose MLP tensors are as wide as its config's ``intermediate_size_mlp`` (a llama4_text
    config's dense MLP: SGLang sizes an EAGLE-3 draft's MLP from it) where ``intermediate_size`` (vLLM's and
    draftsmith's reading) says another width: the key the shapes come from."""
    def note() -> str | None:
        mlp, size = draft_raw.get("intermediate_size_mlp"), draft_raw.get("intermediate_size")
        if type(mlp) is not int or mlp == size:
            return None
        if not any(MLP_ROWS.search(n) and info.shape and info.shape[0] == mlp for n, info in infos.items()):
            return None
        return (f"note: the checkpoint's MLP is {mlp} wide, the draft config's intermediate_size_mlp, which nothing "
                f"reads (SGLang sizes a llama4_text draft's MLP from it); the draft is built with intermediate_size "
                f"{size} (as vLLM reads it): set intermediate_size to {mlp} in the draft's config.json")
    return note
