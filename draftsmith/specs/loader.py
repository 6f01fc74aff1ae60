"""Reading specs: YAML (safe_load only) -> phase 1 (pydantic) + phase 2 (registry) -> one SpecError."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from draftsmith.registry import Registry, default_registry
from draftsmith.specs.errors import Problem, SpecError
from draftsmith.specs.resolve import check_spec_data, pydantic_problem
from draftsmith.specs.schema import Spec


def spec_path(ref: str | Path, registry: Registry) -> Path:
    """A YAML path as given, else the file of a built-in or plugin spec of that name."""
    p = Path(ref)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.is_file():
            raise FileNotFoundError(f"spec file {str(p)!r} does not exist")
        return p
    return registry.spec_source(str(ref)).path


def load_spec(ref: Spec | str | Path, registry: Registry | None = None) -> Spec:
    """A built-in or plugin spec name, a YAML path, or a Spec (returned as is)."""
    if isinstance(ref, Spec):
        return ref
    registry = registry or default_registry()
    path = spec_path(ref, registry)
    spec = parse_spec(read_yaml(path), source=str(path), registry=registry)
    if str(ref) in registry.specs and spec.name != str(ref):
        raise SpecError(str(path), [Problem("name", f"the file says {spec.name!r} but is registered as {ref!r}")])
    return spec


def read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SpecError(str(path), [Problem("", f"not valid YAML: {e}")]) from None


def parse_spec(data: Any, *, source: str = "<spec>", registry: Registry | None = None) -> Spec:
    registry = registry or default_registry()
    if not isinstance(data, Mapping):
        raise SpecError(source, [Problem("", "a spec is a mapping of fields", found=type(data).__name__)])
    problems: list[Problem] = []
    spec = None
    try:
        spec = Spec.model_validate(data)
    except ValidationError as e:
        problems += [pydantic_problem(err, "", Spec) for err in e.errors()]
    problems += check_spec_data(data, registry)
    if problems:
        raise SpecError(source, _dedupe(problems))
    spec._source = source
    return spec


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.path, p.message) not in seen:
            seen.add((p.path, p.message))
            out.append(p)
    return out


def list_specs(registry: Registry | None = None) -> list[str]:
    return [name for name, _ in (registry or default_registry()).spec_names()]
