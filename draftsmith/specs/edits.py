"""Spec edits as data: what a dotted spec path can hold (the readings of a field, from the pydantic model that
checks it: the spec schema or the params model of the component the spec names), and the spec with one field
changed, validated as a YAML file would be. ``doctor`` tries its readings through these; a YAML snippet shows a
change as a user would write it."""
from __future__ import annotations

import copy
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from draftsmith.specs.resolve import SECTIONS, dig, reserved
from draftsmith.specs.schema import Ref, Spec, validate_strict

# which registry kind a component reference at a spec path names (its params model holds the field)
REF_KINDS = {s.path: s.kind for s in SECTIONS if s.key == "kind"}   # draft.layer -> layer, ...


# --- values of a field, from the models that check it ------------------------------------------------------------
def _flat(ann: Any) -> list[Any]:
    # Union / Optional / Annotated -> their members
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _flat(typing.get_args(ann)[0])
    if origin is typing.Union or isinstance(ann, types.UnionType):
        return [m for a in typing.get_args(ann) for m in _flat(a)]
    return [ann]


def _is_model(m: Any) -> bool:
    return isinstance(m, type) and issubclass(m, BaseModel)


def _field(model: Any, name: str) -> Any:
    """``model``'s field ``name`` (pydantic FieldInfo), or None where ``model`` is no model or has no such field."""
    return model.model_fields.get(name) if _is_model(model) else None


def _submodel(info: Any) -> type[BaseModel] | None:
    """The model a field holds (a section, a component reference), the first of a union's; None for a leaf."""
    return next((m for m in _flat(info.annotation) if _is_model(m)), None)


def leaf_values(ann: Any) -> list[Any]:
    """The readings a field of annotation ``ann`` may take: both booleans, a Literal's values (``auto`` excluded)."""
    values: list[Any] = []
    for member in _flat(ann):
        if member is bool:
            values += [False, True]
        elif typing.get_origin(member) is typing.Literal:
            values += [v for v in typing.get_args(member) if v != "auto"]
    return list(dict.fromkeys(values))


@dataclass(frozen=True)
class Field:
    values: tuple[Any, ...]         # the readings to try (``auto`` excluded)
    default: Any                    # the reading used when the spec does not state it; None: read from the config
    declared: Any = None            # the model's declared default (breaks ties between equally good readings)


def field_info(data: Mapping[str, Any], path: str, registry, auto_attention: str | None = None,
               draft_config: Mapping[str, Any] | None = None) -> Field | None:
    """What a dotted spec path can hold for this spec (``data``: the spec as plain data), from the pydantic model
    that checks it (the spec schema, or the params model of the component the spec names); None when the spec's
    components have no such field. ``auto_attention``: the kind ``attention: {kind: auto}`` is for the draft at
    hand (:func:`draftsmith.assembler.build.attention_name`; None: gqa, the reading without a draft).
    ``draft_config`` (the draft's raw config): a field the spec leaves to it gets, as its default, the value the
    component reads there (``Component.reads``), where the component says; else None (unknown)."""
    model: Any = Spec
    parts = path.split(".")
    above = None   # the field holding ``model``: an unstated component is its default's ({kind: auto} attention)
    owner = None   # (kind, name, the spec's params) of the component whose params model ``model`` is
    for i, name in enumerate(parts):
        if _is_model(model) and issubclass(model, Ref):      # {kind: NAME, ...params}: NAME's params model
            here = ".".join(parts[:i])
            kind, ref = REF_KINDS.get(here), dig(data, here)
            if ref is None and above is not None and isinstance(above.default, Ref):
                ref = {"kind": above.default.kind}
            comp_name = ref.get("kind") if isinstance(ref, Mapping) else None
            if kind is None or not isinstance(comp_name, str):
                return None
            if choice_of := reserved(kind).get(comp_name):   # the kind this draft gets (gqa without a draft)
                comp_name = auto_attention or choice_of.choices[0]
            comp = registry.components.get((kind, comp_name))
            if comp is None:
                return None
            model = comp.record.params
            owner = (kind, comp_name, {k: v for k, v in ref.items() if k != "kind"})
        info = _field(model, name)
        if info is None:
            return None
        if i == len(parts) - 1:
            values = leaf_values(info.annotation)
            members = _flat(info.annotation)
            # a field that may say auto (or None) is read from the draft config when unstated: no known default
            auto = type(None) in members or any(typing.get_origin(m) is typing.Literal and "auto" in
                                                typing.get_args(m) for m in members)
            declared = None if info.is_required() else info.default
            if not values:
                return None
            default = config_reading(registry, owner, model, name, draft_config) if auto else declared
            return Field(tuple(values), default, declared)
        owner = None
        model = _submodel(info)
        above = info
    return None


def config_reading(registry, owner: tuple[str, str, dict] | None, model: type[BaseModel], name: str,
                   draft_config: Mapping[str, Any] | None) -> Any:
    """The value field ``name`` of ``owner``'s params takes for ``draft_config`` (``Component.reads``), or None."""
    if owner is None or draft_config is None:
        return None
    kind, comp_name, params = owner
    try:
        validated = validate_strict(model, params)
    except ValueError:   # the spec's own problem (pydantic's ValidationError): the load says it
        return None
    return (registry.reads(kind, comp_name, validated, draft_config) or {}).get(name)


def unstated_components(data: Mapping[str, Any], path: str) -> list[tuple[str, Any]]:
    """The ``{kind: ...}`` a change at ``path`` needs beside it where the spec leaves the component on the way
    unstated (``draft.attention.rope`` in a spec without ``attention``: its default, kind auto), as changes, so that
    the changed spec and the snippet a user pastes both name the kind (a component without one is refused)."""
    out: list[tuple[str, Any]] = []
    model: Any = Spec
    parts = path.split(".")
    for i, name in enumerate(parts[:-1]):
        info = _field(model, name)
        if info is None:
            break
        here = ".".join(parts[: i + 1])
        if isinstance(info.default, Ref) and dig(data, here) is None:
            out.append((f"{here}.kind", info.default.kind))
        model = _submodel(info)
    return out


def current_value(data: Mapping[str, Any], path: str, info: Field) -> Any:
    """The reading the spec uses now: the stated value, else (unstated or ``auto``) the field's default (None:
    unknown)."""
    value = dig(data, path)
    return value if value is not None and value != "auto" else info.default


def with_change(data: Mapping[str, Any], path: str, value: Any) -> dict:
    """A deep copy of ``data`` with ``path`` set; a non-mapping on the way (``aux_layers: auto``) becomes {}."""
    out = copy.deepcopy(dict(data))
    node = out
    *parents, leaf = path.split(".")
    for part in parents:
        if not isinstance(node.get(part), Mapping):
            node[part] = {}
        node[part] = dict(node[part])
        node = node[part]
    node[leaf] = value
    return out


def spec_data(spec: Spec) -> dict:
    return spec.model_dump(mode="json", exclude_unset=True)


def changed_spec(spec: Spec, changes: Sequence[tuple[str, Any]], registry) -> Spec:
    """The spec with ``changes`` applied, validated as a YAML file would be; relative paths keep their base."""
    from draftsmith.specs.loader import parse_spec

    data = spec_data(spec)
    for path, value in changes:
        data = with_change(data, path, value)
    out = parse_spec(data, source=spec.source, registry=registry)
    out._source = spec._source
    return out


def yaml_value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def yaml_snippet(changes: Sequence[tuple[str, Any]]) -> str:
    import yaml

    data: dict = {}
    for path, value in changes:
        data = with_change(data, path, value)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip()
