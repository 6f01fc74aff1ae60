"""Phase 2: names and cross-field rules, checked against the registry. Works on the raw YAML mapping, so it
runs even when phase 1 (pydantic) found problems, and the user sees everything at once."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from draftsmith.hooks import Component
from draftsmith.registry import Registry
from draftsmith.registry.registry import suggest
from draftsmith.specs.errors import Problem

# spec path -> (component kind, key naming the component, default name)
SECTIONS: tuple[tuple[str, str, str, str | None], ...] = (
    ("draft.layer", "layer", "kind", "llama"),
    ("draft.attention", "attention", "kind", "auto"),
    ("draft.mlp", "mlp", "kind", "swiglu"),
    ("draft.norm", "norm", "kind", "rms"),
    ("draft.fusion", "fusion", "kind", None),
    ("quant", "quant", "method", "none"),
)
AUTO_ATTENTION = "gqa"  # what `attention: {kind: auto}` params are checked against (MLA is chosen per checkpoint)


def dig(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def listing(registry: Registry, kind: str) -> str:
    return ", ".join(f"{n} ({p})" for n, p in registry.names(kind)) or "none registered"


def params_problems(model: type[BaseModel], params: Mapping[str, Any], path: str) -> list[Problem]:
    try:
        model.model_validate(dict(params))
    except ValidationError as e:
        return [pydantic_problem(err, path, model) for err in e.errors()]
    return []


def pydantic_problem(err: Mapping[str, Any], prefix: str, model: type[BaseModel] | None) -> Problem:
    loc = [str(x) for x in err["loc"]]
    path = ".".join([p for p in [prefix, *loc] if p])
    kind, found = err["type"], err.get("input")
    if kind == "extra_forbidden":
        allowed = sorted(_fields_at(model, loc[:-1]))
        return Problem(path, f"unknown field {loc[-1]!r}", allowed=", ".join(allowed), hint=suggest(loc[-1], allowed))
    if kind == "missing":
        return Problem(path, "required field is missing")
    if kind in ("literal_error", "enum"):
        expected = err.get("ctx", {}).get("expected", "")
        choices = [c.strip(" '") for c in expected.replace(" or ", ",").split(",") if c.strip()]
        return Problem(path, f"{found!r} is not allowed", allowed=expected, hint=suggest(str(found), choices))
    return Problem(path, err["msg"], found=found)


def _fields_at(model: type[BaseModel] | None, loc: list[str]) -> set[str]:
    for part in loc:
        if model is None or part.isdigit():
            continue
        field = model.model_fields.get(part)
        ann = getattr(field, "annotation", None)
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else _tuple_item(ann)
    return set(model.model_fields) if model else set()


def _tuple_item(ann: Any) -> type[BaseModel] | None:
    for arg in getattr(ann, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def check_ref(registry: Registry, ref: Any, path: str, kind: str, key: str, default: str | None) -> list[Problem]:
    if ref is None:
        return [] if default is not None else [Problem(f"{path}.{key}", f"a {kind} must be named")]
    if not isinstance(ref, Mapping):
        return []  # phase 1 reports the wrong type
    name = ref.get(key, default)
    lookup = AUTO_ATTENTION if (kind == "attention" and name == "auto") else name
    comp = registry.components.get((kind, lookup))
    if comp is None:
        known = [n for n, _ in registry.names(kind)]
        return [Problem(f"{path}.{key}", f"unknown {kind} {name!r}", allowed=listing(registry, kind),
                        hint=suggest(str(name), known))]
    params = {k: v for k, v in ref.items() if k != key}
    return params_problems(comp.record.params, params, path)


def resolve(registry: Registry, kind: str, name: str, params: Mapping[str, Any]) -> tuple[Component, BaseModel]:
    """The component and its validated params (the spec was checked already, so this does not fail on a
    validated spec)."""
    comp = registry.get(kind, name)
    return comp, comp.params.model_validate(dict(params))


def check_spec_data(data: Mapping[str, Any], registry: Registry) -> list[Problem]:
    problems: list[Problem] = []
    for path, kind, key, default in SECTIONS:
        problems += check_ref(registry, dig(data, path), path, kind, key, default)
    for i, rule in enumerate(dig(data, "weights.rules") or []):
        problems += check_ref(registry, rule, f"weights.rules.{i}", "weight_rule", "kind", "regex")
    backend = dig(data, "decoding.attention")
    if backend is not None and ("attn_backend", backend) not in registry.components:
        known = [n for n, _ in registry.names("attn_backend")]
        problems.append(Problem("decoding.attention", f"unknown attention backend {backend!r}",
                                allowed=listing(registry, "attn_backend"), hint=suggest(str(backend), known)))
    return problems + decoding_problems(dig(data, "decoding") or {})


def decoding_problems(dec: Mapping[str, Any], path: str = "decoding") -> list[Problem]:
    """Cross-field rules of the decoding section (also applied to per-call overrides)."""
    topk, steps, n = dec.get("topk", 4), dec.get("steps", 5), dec.get("draft_tokens", 8)
    page, mode = dec.get("page_size", 1), dec.get("mode", "auto")
    if not all(isinstance(v, int) and v >= 1 for v in (topk, steps, n, page)):
        return []  # phase 1 reports types and bounds
    out = []
    most = topk + (steps - 1) * topk * topk
    if n - 1 > most:
        out.append(Problem(f"{path}.draft_tokens", f"{n} tokens cannot be drafted with topk={topk}, steps={steps}",
                           allowed=f"2..{most + 1} (topk + (steps-1)*topk^2 candidates + the root)"))
    if mode == "v2" and (topk == 1 or page != 1):
        why = "topk is 1 (a chain has nothing to compact)" if topk == 1 else f"page_size is {page}, not 1"
        out.append(Problem(f"{path}.mode", f"v2 (tree drafting with compaction) is unsupported here: {why}",
                           allowed="auto, v1", hint="Use mode: auto to fall back to v1 with a logged reason."))
    return out
