"""Reading specs: YAML (safe_load only) -> phase 1 (pydantic) + phase 2 (registry) -> one SpecError."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from draftsmith.registry import Registry, default_registry
from draftsmith.specs.errors import Problem, SpecError
from draftsmith.specs.resolve import check_spec_data
from draftsmith.specs.translate import describe, problems_from
from draftsmith.specs.schema import Spec


def spec_path(ref: str | Path, registry: Registry) -> Path:
    """A ``.yaml`` / ``.yml`` path as given; else the file of a registered spec of that name; else an existing file.
    (A registered name wins over a folder or file of the same name in the working directory.)"""
    p = Path(ref)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise FileNotFoundError(f"spec file {str(p)!r} does not exist")
        return p
    if str(ref) in registry.specs or not p.is_file():
        return registry.spec_source(str(ref)).path
    return p


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
        what = "the document is empty" if data is None else f"the document is a {type(data).__name__}"
        raise SpecError(source, [Problem("", f"{what}; a spec is a mapping of fields", allowed=describe(Spec))])
    shape: list[Problem] = []
    spec = None
    try:
        spec = Spec.model_validate(data)
    except ValidationError as e:
        shape = problems_from(e, "", Spec)
    names = check_spec_data(data, registry)
    # Phase 2 knows the registry, so where both phases speak about one path, its account (with the names that
    # exist and who provides them) replaces pydantic's.
    problems = [p for p in shape if p.path not in {q.path for q in names}] + names
    if problems:
        raise SpecError(source, problems)
    spec._source = source
    return spec


def list_specs(registry: Registry | None = None) -> list[str]:
    return [name for name, _ in (registry or default_registry()).spec_names()]
