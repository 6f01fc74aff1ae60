"""``extends:``: a spec written as its changes to another (a built-in's or a plugin's name, or a YAML file's path
relative to the spec's own file).

The base's document is read as a spec file is (every bound of one), its own ``extends`` first (a chain of at most
``limits.EXTENDS_DEPTH`` bases, none twice), and the spec is merged into it: a value the spec writes replaces the
base's, except a mapping written over a mapping, which is merged key by key, and a component whose ``kind`` differs
from the base's, which replaces it whole (another component's params are not this one's). A list replaces the base's
list. ``name`` and ``description`` are never inherited (a spec says what it is); a base's relative ``checkpoints``
stay relative to the base's file. The merged document is checked as one spec; a problem in a value the spec took from a
base is said at the spec's ``extends`` line, naming the base's file and line.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from draftsmith import limits
from draftsmith.errors import Problem, SpecError, short_list, short_text, suggest
from draftsmith.registry import Registry
from draftsmith.specs.documents import load_yaml_text, read_text, registered_file
from draftsmith.yaml_places import Places, yaml_places

OWN = ("name", "description", "extends")   # what a spec never inherits


@dataclass(frozen=True)
class Base:
    """A base a spec's document took values from: its file and where each of its paths is written."""
    source: str
    places: Places


def with_bases(data: Any, source: str, registry: Registry) -> tuple[Any, list[Base]]:
    """(the document with its bases merged in, the bases, nearest first); the document as it is where it extends
    nothing (or where its ``extends`` is no name, which the schema refuses). A base that cannot be found or read, or
    a chain that loops or runs past limits.EXTENDS_DEPTH, is a SpecError naming ``source``'s ``extends`` (a base's own
    unreadable file: that file's error)."""
    here = Path(source)
    chain = [here.resolve()] if here.is_file() else []
    return _merged_chain(data, source, here.parent if chain else Path.cwd(), registry, chain, 0)


def _merged_chain(data: Any, source: str, folder: Path, registry: Registry, chain: list[Path], depth: int):
    ref = data.get("extends") if isinstance(data, Mapping) else None
    if not isinstance(ref, str) or not ref:
        return data, []
    path = _base_file(ref, folder, registry, source)
    key = path.resolve()
    if key in chain:
        raise SpecError(source, [Problem("extends", f"{short_text(path, 300)} extends, through its bases, a spec of "
                                                    "this chain: bases cannot loop", found=ref)])
    if depth == limits.EXTENDS_DEPTH:
        raise SpecError(source, [Problem("extends", f"more than {limits.EXTENDS_DEPTH} bases in one chain", found=ref)])
    text = read_text(path)
    document = load_yaml_text(text, str(path))
    if not isinstance(document, Mapping):
        raise SpecError(source, [Problem("extends", f"the base {short_text(path, 300)} holds no mapping of spec "
                                                    "fields", found=ref)])
    base, further = _merged_chain(document, str(path), path.parent, registry, chain + [key], depth + 1)
    base = {k: v for k, v in base.items() if k not in OWN}
    if isinstance(base.get("checkpoints"), Mapping):
        base["checkpoints"] = {k: _rebased(v, path.parent) for k, v in base["checkpoints"].items()}
    return merged(base, data), [Base(str(path), yaml_places(text))] + further


def _base_file(ref: str, folder: Path, registry: Registry, source: str) -> Path:
    """The file ``extends: ref`` names: a path (a .yaml / .yml name, or one with a folder) relative to ``folder``,
    else a registered spec's file."""
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        path = folder / ref
        if path.is_file():
            return path
        what = "is not a regular file" if path.exists() else "does not exist"
        raise SpecError(source, [Problem("extends", f"the base spec file {short_text(path, 300)} {what}", found=ref)])
    if registry.has_spec(ref):
        return registered_file(ref, registry)
    names = [name for name, _ in registry.spec_names()]
    raise SpecError(source, [Problem("extends", "no spec of that name (a path: a .yaml file, relative to this one)",
                                     found=ref, allowed=short_list(names, 30, 600), hint=suggest(ref, names).strip())])


def _rebased(ref: Any, folder: Path) -> Any:
    """A base's checkpoint folder as the spec reads it: a relative one made relative to the base's own file."""
    if not isinstance(ref, str) or not ref or ref.startswith("cache:") or Path(ref).is_absolute():
        return ref
    return str(folder / ref)


def merged(base: Any, spec: Any) -> Any:
    """``spec`` written over ``base``: mappings merged key by key, unless both name a ``kind`` and differ; anything
    else replaced."""
    if not (isinstance(base, Mapping) and isinstance(spec, Mapping) and _same_kind(base, spec)):
        return spec
    return {**base, **{k: merged(base[k], v) if k in base else v for k, v in spec.items()}}


def _same_kind(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two mappings are one component's (or no component's): no ``kind`` that differs."""
    return a.get("kind", b.get("kind")) == b.get("kind", a.get("kind"))


def inherited(problems: Sequence[Problem], bases: Sequence[Base], source: str, text: str | None) -> list[Problem]:
    """``problems`` with each one in a value taken from a base (the base writes more of its path than the spec's own
    ``text``, else its file ``source``'s) said at the spec's ``extends`` line, naming the base's file and line; the
    others as they are."""
    if not bases:
        return list(problems)
    own = _own_places(source, text)
    at = own.where.get("extends") if own is not None else None

    def placed(p: Problem) -> Problem:
        deepest = max(range(len(bases) + 1), key=lambda i: (_written(own if i == 0 else bases[i - 1].places, p.path),
                                                            -i))
        if deepest == 0 or p.line is not None:
            return p
        base = bases[deepest - 1]
        line = base.places.place(p.path, True)[0]
        said = f"from the base {short_text(base.source, 300)}" + (f", line {line[0]}" if line else "")
        return replace(p, message=f"{p.message} ({said})", line=at[0] if at else None, column=at[1] if at else None)
    return [placed(p) for p in problems]


def _written(places: Places | None, path: str) -> int:
    """How many parts of dotted ``path`` ``places`` writes (its deepest written prefix's length)."""
    if places is None:
        return 0
    parts = path.split(".") if path else []
    return next((k for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in places.where), 0)


def _own_places(source: str, text: str | None) -> Places | None:
    if text is None:
        try:
            text = read_text(Path(source))
        except (OSError, SpecError):   # a label, not a file (parse_spec of data): nothing is written anywhere
            return None
    return yaml_places(text)


def changes(base: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """The least a spec extending ``base`` writes to be ``data`` (``merged(base, changes(base, data)) == data`` for
    mappings whose keys ``data`` holds all of, as whole spec dumps do): what differs, a mapping by key where merging
    gives it back, else whole."""
    if not _same_kind(base, data):
        return dict(data)   # another component than the base's: written whole
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in base:
            out[key] = value
        elif isinstance(value, Mapping) and isinstance(base[key], Mapping):
            if (sub := changes(base[key], value)) and merged(base[key], sub) == value:
                out[key] = sub
            elif merged(base[key], sub) != value:   # a key the base has and this mapping has not: written whole
                out[key] = value
        elif value != base[key]:
            out[key] = value
    return out
