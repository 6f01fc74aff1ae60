"""Where an unknown key of a spec belongs when it sits one level off: a component's param written beside its section
(``draft.fc_norm`` for ``draft.fusion``'s), a section's field written inside a component (``draft.fusion.feed_back``
for ``draft.feed_back``), or a field of a nested section written beside it (``draft.input`` for ``draft.norms``'s).
A wrongly indented key is a spec author's commonest slip, and a near spelling of a sibling ("Did you mean
'norm'?") sent the author to a field that takes something else."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from draftsmith.errors import Problem
from draftsmith.registry import Registry
from draftsmith.specs.resolve import SECTIONS, dig, reserved
from draftsmith.specs.schema import Spec
from draftsmith.specs.translate import model_in

UNKNOWN = "unknown field "   # translate's message for a key no model field takes


def placed(problems: list[Problem], data: Any, registry: Registry) -> list[Problem]:
    """``problems`` with each unknown key that one place one level off takes hinted there (its near-spelling hint
    replaced); a key several places take, or none, keeps its hint."""
    return [dataclasses.replace(p, hint=home) if p.message.startswith(UNKNOWN) and (
        home := _home(p.path, data, registry)) else p for p in problems]


def _home(path: str, data: Any, registry: Registry) -> str | None:
    parent, _, key = path.rpartition(".")
    homes = [(child, "in") for child in _children(parent) if key in _keys(child, data, registry)]
    if key in _keys(grand := parent.rpartition(".")[0], data, registry):   # at top level: not in the spec's own
        homes.append((grand, "out"))
    if len(homes) != 1:
        return None
    (where, way), = homes
    if way == "out":
        return (f"{key!r} is a field of {where or 'the spec'}, one level out: write it beside "
                f"{parent.rpartition('.')[2]!r}, not inside it")
    return f"{key!r} belongs under {where}{_whose(where, data)}: indent it there"


def _whose(path: str, data: Any) -> str:
    """' (a param of fusion 'eagle3')' for a component section, else ''."""
    section = next((s for s in SECTIONS if s.path == path), None)
    name = None if section is None else _named(section, data)
    return "" if name is None else f" (a param of {section.kind} {name!r})"


def _named(section, data: Any) -> str | None:
    ref = dig(data, section.path)
    name = (ref.get(section.key, section.unnamed) if isinstance(ref, Mapping) else
            section.absent if ref is None else None)
    return name if isinstance(name, str) else None


def _model(path: str) -> type[BaseModel] | None:
    """The schema model at a dotted path of a spec (None past a model)."""
    model: type[BaseModel] | None = Spec
    for part in [p for p in path.split(".") if p]:
        field = model.model_fields.get(part) if model is not None else None
        model = None if field is None else model_in(field.annotation)
    return model


def _children(path: str) -> list[str]:
    """The sections nested one level inside ``path``: fields whose value is a model (a component section too)."""
    model = _model(path)
    if model is None:
        return []
    return [f"{path}.{name}" if path else name for name, field in model.model_fields.items()
            if model_in(field.annotation) is not None]


def _keys(path: str, data: Any, registry: Registry) -> set[str]:
    """The keys the section at ``path`` takes: a component section's its component's params (with the key that
    names it), any other its model's fields."""
    section = next((s for s in SECTIONS if s.path == path), None)
    if section is not None:
        name = _named(section, data)
        # a name the spec keeps for its own choice (attention's auto) picks among every component of the kind
        choices = [n for n, _ in registry.names(section.kind)] if name in reserved(section.kind) else [name]
        known = [registry.components[section.kind, n].record for n in choices if (section.kind, n) in
                 registry.components]   # an unknown name is said by the section's own problem
        return {section.key, *(key for c in known for key in c.params.model_fields)}
    model = _model(path)
    return set(model.model_fields) if model is not None else set()
