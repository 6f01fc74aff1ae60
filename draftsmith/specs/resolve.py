"""Phase 2: names and cross-field rules, checked against the registry. Works on the raw YAML mapping, so it
runs even when phase 1 (pydantic) found problems, and the user sees everything at once."""
from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from draftsmith import limits
from draftsmith.components.weights import pattern_problem
from draftsmith.errors import Problem, short, spec_word, suggest
from draftsmith.hooks import Component
from draftsmith.hooks.kinds import KINDS, Reserved
from draftsmith.hooks.records import NoParams
from draftsmith.registry import Registry
from draftsmith.registry.registry import BUILTIN, Provided
from draftsmith.specs.draft_rules import draft_problems
from draftsmith.specs.schema import Decoding, Rule, Spec, validate_strict
from draftsmith.specs.translate import NO_KEYS, problems_from


class Section(NamedTuple):
    path: str               # where the component reference sits in a spec
    kind: str               # the registry kind it names
    key: str                # the key holding the name
    absent: str | None      # the name used when the whole section is absent (None: the section is required)
    unnamed: str | None     # the name used when the section omits ``key`` (None: the key is required)


def section(path: str, kind: str, key: str = "kind") -> Section:
    """The reference at ``path``, with the names the schema gives it when a spec leaves out the section or its
    ``key`` (the one source of the defaults: Draft's fields and Quant's method)."""
    model, parts = Spec, path.split(".")
    for part in parts[:-1]:
        model = model.model_fields[part].annotation
    info = model.model_fields[parts[-1]]
    named = info.annotation.model_fields[key]
    return Section(path, kind, key, None if info.is_required() else getattr(info.default, key),
                   None if named.is_required() else named.default)


SECTIONS: tuple[Section, ...] = (
    *(section(f"draft.{kind}", kind) for kind in ("layer", "attention", "mlp", "norm", "fusion")),
    section("quant", "quant", "method"),
)
RULES = Section("weights.rules", "weight_rule", "kind", None, Rule.model_fields["kind"].default)   # regex


def dig(data: Any, path: str) -> Any:
    """The value at a dotted path of plain data (``""``: the data itself); None where a part is missing."""
    for part in [p for p in path.split(".") if p]:
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def put(data: dict[str, Any], path: str, value: Any) -> None:
    """Set the value at a dotted path of plain data (:func:`dig`'s inverse), making the missing sections."""
    *parents, last = path.split(".")
    for part in parents:
        data = data.setdefault(part, {})
    data[last] = value


def reserved(kind: str) -> Mapping[str, Reserved]:
    """The names a spec keeps for a choice of its own in this kind (attention's ``auto``)."""
    return KINDS[kind].reserved if kind in KINDS else {}


def names(registry: Registry, kind: str) -> list[str]:
    return [n for n, _ in registry.names(kind)] + list(reserved(kind))


def listing(registry: Registry, kind: str) -> str:
    known = [f"{n} ({p})" for n, p in registry.names(kind)]
    known += [f"{n} ({r.meaning})" for n, r in reserved(kind).items()]
    return ", ".join(known) or "none registered"


def params_problems(model: type[BaseModel], params: Mapping[str, Any], path: str) -> list[Problem]:
    try:
        validate_strict(model, dict(params))
    except ValidationError as e:
        return problems_from(e, path, model)
    return []


def component_params_problems(comp: Provided, params: Mapping[str, Any], path: str) -> list[Problem]:
    """:func:`params_problems` of a registered component's params; a plugin's component's say whose params they are.
    A key given to a plugin's component that takes none is said as that plugin's choice: NO_KEYS's word on sizes and
    eps holds for the built-in components only."""
    model = comp.record.params
    problems = params_problems(model, params, path)
    if comp.plugin == BUILTIN:
        return problems
    if model.model_fields:   # whose model refused it: a plugin's, which its author documents
        whose = f"the params of {comp.record.kind} {short(comp.record.name)}, from plugin {comp.plugin!r}"
        return [dataclasses.replace(p, allowed=f"{p.allowed} ({whose})") if p.allowed else p for p in problems]
    none = "no params model" if model is NoParams else f"params model {model.__name__}, which has no fields"
    allowed = (f"no keys: {comp.record.kind} {short(comp.record.name)} of plugin {comp.plugin!r} declares {none}, "
               "so a spec can give it no keys")
    hint = ("Leave the key out; a key this component should take needs a params model from the plugin "
            "(Component(..., params=Model) in its draftsmith_components hook).")
    return [dataclasses.replace(p, allowed=allowed, hint=hint) if p.allowed == NO_KEYS else p for p in problems]


def unknown_name(registry: Registry, kind: str, name: Any, path: str) -> Problem:
    """An unknown component name of ``kind``: the closest name of that kind, the kind's names, and where
    DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD kept the installed plugins out, that one of them may provide it."""
    hint = suggest(str(name), names(registry, kind))
    if not hint and isinstance(name, str) and any(c in name for c in ".:/"):
        hint = ("A spec names registered components only; import paths are never imported. Register it from a "
                "plugin's draftsmith_components hook.")
    elif not hint and kind != "attn_backend" and not any(n == name for _, n in registry.components):
        hint = ("A part draftsmith lacks comes from a package's plugin (README, \"Adding components from a "
                "package\"); `draftsmith list` shows what is registered.")   # no other kind's name either
    hint = " ".join(h.strip() for h in (hint, registry.not_loaded_note()) if h)
    what = "attention backend" if kind == "attn_backend" else kind
    return Problem(path, f"unknown {what} {spec_word(name)}", allowed=listing(registry, kind), hint=hint)


def check_ref(registry: Registry, ref: Any, where: Section, path: str | None = None) -> list[Problem]:
    """Problems of one component reference ``{<key>: <name>, ...params}`` found at ``path``."""
    path = path or where.path
    form = f"{{{where.key}: NAME, ...params}}; NAME is one of: {listing(registry, where.kind)}"
    if ref is None:
        if where.absent is not None:
            ref = {where.key: where.absent}
        else:
            return [Problem(path, "required field is missing", allowed=form)]
    if not isinstance(ref, Mapping):
        hint = f"Write {{{where.key}: {ref}}}." if known(registry, where.kind, ref) else ""
        return [Problem(path, f"a {where.kind} is written as a mapping", found=ref, allowed=form, hint=hint)]
    if where.key not in ref and where.unnamed is None:
        near = misspelt_key(ref, where.key)
        hint = "" if near is None else f"Found {short(near)}: did you mean {where.key!r}?"
        return [Problem(f"{path}.{where.key}", "required field is missing", allowed=listing(registry, where.kind),
                        hint=hint)]
    name = ref.get(where.key, where.unnamed)
    params = {k: v for k, v in ref.items() if k != where.key}
    comp = registry.components.get((where.kind, name)) if isinstance(name, str) else None
    misspelt = []
    if comp is not None and (near := misspelt_key(params, where.key, comp.record.params.model_fields)):
        # said as that key, beside the name a default or a base spec gives (quant's 'mehtod' was "takes no params");
        # the other params are judged still, against the component the misspelt key names where it names one
        misspelt = [Problem(f"{path}.{near}", f"unknown field {short(near)}", allowed=form,
                            hint=f"Did you mean {where.key!r}?")]
        meant = ref[near]
        comp = registry.components.get((where.kind, meant), comp) if isinstance(meant, str) else comp
        params = {k: v for k, v in params.items() if k != near}
    if isinstance(name, str) and (choice_of := reserved(where.kind).get(name)):   # params that suit one choice
        found = [component_params_problems(comp, params, path) for choice in choice_of.choices  # (per checkpoint)
                 if (comp := registry.components.get((where.kind, choice))) is not None]
        return min(found, key=len, default=[])
    if comp is None:
        return [unknown_name(registry, where.kind, name, f"{path}.{where.key}")]
    said = component_params_problems(comp, params, path)   # a plugin's say whose params they list: as they are
    return misspelt + ([_naming_key(p, path, where.key) for p in said] if comp.plugin == BUILTIN else said)


def _naming_key(problem: Problem, path: str, key: str) -> Problem:
    """A built-in reference's unknown key said with the reference's own key among the allowed ones (its params'
    fields alone left out ``kind``, which the same mapping takes)."""
    top = problem.path.startswith(f"{path}.") and "." not in problem.path.removeprefix(f"{path}.")
    if not (top and problem.message.startswith("unknown field ") and problem.allowed) or \
            problem.allowed.startswith("no keys"):   # NO_KEYS, or a plugin's part that takes none
        return problem
    return dataclasses.replace(problem, allowed=f"{key}, {problem.allowed}")


def misspelt_key(ref: Mapping[Any, Any], key: str, fields: Any = ()) -> str | None:
    """The key of ``ref`` that is ``key`` misspelt ('knid', 'Kind', 'mehtod'; 3 letters of 4 alike at least, so a
    sliding window's 'window' is no 'kind'), none of the component's own ``fields``; None where there is none."""
    return next((k for k in ref if isinstance(k, str) and k != key and k not in fields
                 and difflib.SequenceMatcher(None, k.lower(), key).ratio() >= 0.75), None)


def known(registry: Registry, kind: str, name: Any) -> bool:
    return isinstance(name, str) and (kind, name) in registry.components


def fusion_params(spec, registry: Registry | None = None) -> BaseModel:
    """The spec's fusion params, validated by its fusion's model (Eagle3Params, Eagle1Params, ...)."""
    from draftsmith.registry import default_registry

    return resolve(registry or default_registry(), "fusion", spec.draft.fusion.kind, spec.draft.fusion.params)[1]


def resolve(registry: Registry, kind: str, name: str, params: Mapping[str, Any]) -> tuple[Component, BaseModel]:
    """The component and its validated params (the spec was checked already, so this does not fail on a
    validated spec)."""
    comp = registry.get(kind, name)
    return comp, validate_strict(comp.params, dict(params))


def check_spec_data(data: Mapping[str, Any], registry: Registry) -> list[Problem]:
    problems: list[Problem] = []
    for section in SECTIONS:
        parent = dig(data, section.path.rpartition(".")[0]) if "." in section.path else data
        if isinstance(parent, Mapping):  # a missing or malformed parent is phase 1's to report
            problems += check_ref(registry, parent.get(section.path.rpartition(".")[2]), section)
    weights = dig(data, "weights")
    rules = weights.get("rules") if isinstance(weights, Mapping) else None
    for i, rule in enumerate(rules if isinstance(rules, (list, tuple)) else []):
        problems += check_ref(registry, rule, RULES, f"{RULES.path}.{i}")
        problems += rule_control_problems(rule, f"{RULES.path}.{i}")
    ignore = weights.get("ignore") if isinstance(weights, Mapping) else None
    for i, pattern in enumerate(ignore if isinstance(ignore, (list, tuple)) else []):
        problems += regex_problems(pattern, f"weights.ignore.{i}")
    problems += cache_problems(dig(data, "checkpoints"))
    problems += draft_problems(data, registry)
    dec = dig(data, "decoding")
    if not isinstance(dec, Mapping):
        return problems  # phase 1 reports a decoding section that is not a mapping
    backend = dec.get("attention")
    if backend is not None and not known(registry, "attn_backend", backend):
        problems.append(unknown_name(registry, "attn_backend", backend, "decoding.attention"))
    return problems + decoding_problems(dec)


def cache_problems(checkpoints: Any) -> list[Problem]:
    """A ``cache:NAME`` checkpoint must name a target that :mod:`draftsmith.hub` knows how to fetch."""
    from draftsmith import hub

    out = []
    for which in ("target", "draft"):
        name = hub.cache_name(checkpoints.get(which)) if isinstance(checkpoints, Mapping) else None
        if name is not None and name not in hub.SOURCES:
            out.append(Problem(f"checkpoints.{which}", "unknown cached target", found=checkpoints[which],
                               allowed=", ".join(hub.SCHEME + k for k in hub.SOURCES),
                               hint=suggest(name, list(hub.SOURCES)).strip()))
    return out


def control_problems(text: Any, path: str, what: str = "pattern") -> list[Problem]:
    r"""A pattern (or replacement) holding a C0 control character or DEL: no checkpoint name holds one, so it would
    match nothing. In double quotes YAML reads ``\b`` as a backspace, ``\t`` as a tab, ``\x2e`` as '.': such a
    pattern is almost always a regex written in double quotes."""
    if not isinstance(text, str) or (bad := next((c for c in text if ord(c) < 0x20 or c == "\x7f"), None)) is None:
        return []
    why = {"\b": "\\b as a backspace", "\t": "\\t as a tab", "\n": "\\n as a newline",
           "\r": "\\r as a carriage return", "\f": "\\f as a form feed", "\a": "\\a as a bell",
           "\v": "\\v as a vertical tab", "\x1b": "\\e as an escape", "\0": "\\0 as a NUL"}.get(bad)
    said = f"In double quotes YAML reads {why}" if why else "In double quotes YAML reads \\xNN as that character"
    effect = "which no checkpoint name holds, so it would match nothing" if what == "pattern" else \
        "which no tensor name holds"
    return [Problem(path, f"the {what} holds the control character {bad!r}, {effect}", found=text,
                    hint=f"{said} (and \\x2e as '.'); write the {what} in single quotes, where a backslash is a "
                         "backslash.")]


def rule_control_problems(rule: Any, path: str) -> list[Problem]:
    """Control characters in a weight rule's patterns and names: match, inverse, replace, into."""
    if not isinstance(rule, Mapping):
        return []
    out = control_problems(rule.get("match"), f"{path}.match")
    out += control_problems(rule.get("replace"), f"{path}.replace", "replacement")
    for key, what in (("inverse", ("pattern", "replacement")), ("into", None)):
        items = rule.get(key)
        for j, item in enumerate(items if isinstance(items, (list, tuple)) else []):
            said = "part name" if what is None else what[j] if j < 2 else "item"   # an inverse is a pair
            out += control_problems(item, f"{path}.{key}.{j}", said)
    return out


def regex_problems(pattern: Any, path: str) -> list[Problem]:
    if not isinstance(pattern, str):
        return []  # phase 1 reports the type
    if problems := control_problems(pattern, path):
        return problems
    if len(pattern) <= limits.REGEX_CHARS:   # a longer one is refused below, before anything compiles it
        try:
            re.compile(pattern)
        except re.error as e:
            return [Problem(path, f"not a valid regular expression: {e}", found=pattern,
                            allowed="a Python regular expression (re syntax), searched in each checkpoint name")]
    if (why := pattern_problem(pattern)) is not None:
        return [Problem(path, f"refused: {why}", found=pattern)]
    return []


def is_chain(topk: int, mode: str, page_size: int) -> bool:
    """Whether a decoding section runs a chain of steps + 1 nodes, whatever draft_tokens says (choose_mode's v1
    without a target at hand): topk 1, mode v1, or auto with a page_size past 1."""
    return topk == 1 or mode == "v1" or (mode == "auto" and page_size != 1)


def unreached_steps(topk: int, steps: int, draft_tokens: int, mode: str, page_size: int) -> str | None:
    """What a tree whose draft_tokens cannot reach its depth is told: its deepest node sits at depth
    draft_tokens - 1 (a node is chosen only with its parent), so the steps past it draft candidates never verified,
    each a draft forward. None for a chain (its draft_tokens is unused) or a tree that reaches its depth."""
    if is_chain(topk, mode, page_size) or draft_tokens - 1 >= steps:
        return None
    return (f"decoding.steps is {steps}, but a tree of draft_tokens {draft_tokens} (the root counted) reaches depth "
            f"{draft_tokens - 1} at most: steps {draft_tokens - 1} drafts the same tree with "
            f"{steps - draft_tokens + 1} fewer draft forward{'s' * (steps - draft_tokens + 1 != 1)} a step")


def decoding_section_problems(decoding: Decoding) -> list[Problem]:
    """A spec's decoding section as it is assembled: one a file gave was checked when it loaded, but
    ``Spec.with_decoding`` copies values unchecked (topk 0 failed inside generate(), mode 'v9' ran as v2), so the
    values as set, unknown keys included, are checked again as a file's are."""
    data = dict(decoding)
    try:
        validate_strict(Decoding, data)
    except ValidationError as e:
        return problems_from(e, "decoding", Decoding, data=data)
    return decoding_problems(data)


def tree_blockers(topk: int, page_size: int) -> list[str]:
    """Why a decoding section cannot draft a tree (mode v2): the one rule the spec checks, a call's overrides, inspect's
    proposal and the mode choice read. Empty where a tree can be drafted."""
    return [why for why, holds in (("topk is 1", topk == 1), (f"page_size is {page_size}", page_size != 1)) if holds]


def most_draft_tokens(topk: int, steps: int) -> int:
    """The most nodes a tree of ``topk`` children per expanded node and ``steps`` draft forwards verifies: topk
    candidates, (steps-1)*topk^2 more, and the root."""
    return topk + (steps - 1) * topk * topk + 1


def decoding_problems(dec: Mapping[str, Any], path: str = "decoding") -> list[Problem]:
    """Cross-field rules of the decoding section (also applied to per-call overrides)."""
    # a key the section leaves out takes the schema's default (one source for both)
    topk, steps, n, page, mode = (dec.get(k, Decoding.model_fields[k].default)
                                  for k in ("topk", "steps", "draft_tokens", "page_size", "mode"))
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (topk, steps, n, page)):
        return []  # phase 1 reports types and bounds
    out = []
    if n > (most := most_draft_tokens(topk, steps)) and not is_chain(topk, mode, page):   # a chain of steps + 1
        out.append(Problem(f"{path}.draft_tokens", f"{n} tokens cannot be drafted with topk={topk}, steps={steps}",
                           allowed=f"2..{most} (topk + (steps-1)*topk^2 candidates + the root)"))   # has no tree
    if mode == "v2" and (why := tree_blockers(topk, page)):
        out.append(Problem(f"{path}.mode", f"v2 (tree drafting with compaction) is unsupported here: {'; '.join(why)}",
                           allowed="auto, v1", hint="Use mode: auto to fall back to v1 with a logged reason."))
    return out
