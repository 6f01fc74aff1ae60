"""``extends:``: a spec written as its changes to another (a built-in's or a plugin's name, or a YAML file's path
relative to the spec's own file).

The base's document is read as a spec file is (every bound of one), its own ``extends`` first (a chain of at most
``limits.EXTENDS_DEPTH`` bases, none twice), and the spec is merged into it: a value the spec writes replaces the
base's, except a mapping written over a mapping, which is merged key by key, and a component whose ``kind`` differs
from the base's (quant's ``method``), which replaces it whole (another component's params are not this one's). A list
replaces the base's list. ``name`` and ``description`` are never inherited (a spec says what it is); a base's relative
``checkpoints`` stay relative to the base's file. The merged document is checked as one spec; a problem in a value a
base gave (:func:`origin`) is said at the spec's ``extends`` line, naming the base's file and line.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from draftsmith import limits
from draftsmith.errors import DraftsmithError, NotFound, Problem, SpecError, short, short_list, short_text, suggest
from draftsmith.registry import Registry
from draftsmith.specs.documents import (MODEL_CONFIG_FIX, load_yaml_text, model_config, near_file, no_file,
                                        read_text, registered_file)
from draftsmith.yaml_places import Place, Places, yaml_places

OWN = ("name", "description", "extends")   # what a spec never inherits


@dataclass(frozen=True)
class Base:
    """A base a spec's document took values from: its file, where each of its paths is written, and its own document
    (aliases and YAML merge keys followed, not merged with its own bases; ``OWN`` keys out, checkpoints absolute)."""
    source: str
    places: Places
    data: Mapping[str, Any]


class _Refused(Exception):
    def __init__(self, message: str, ref: str, **more: str):
        self.problem = Problem("extends", message, found=ref, **more)


def with_bases(data: Any, source: str, registry: Registry) -> tuple[Any, list[Base]]:
    """(the document with its bases merged in, the bases, nearest first); the document as it is where it extends
    nothing (or where its ``extends`` is no name, which the schema refuses). A base that cannot be found or read, or
    a chain that loops or runs past limits.EXTENDS_DEPTH, is a SpecError of ``source`` at its ``extends``, naming
    the base where it happened (a base's base's problem is the spec's: its ``extends`` is where it comes in)."""
    if not (isinstance(data, Mapping) and data.get("extends")):
        return data, []   # nothing to read (the file system is not asked: doctor parses hundreds of edits)
    file = _file(source)
    try:
        return _chain(data, "", _folder(file), registry, [file.resolve()] if file else [])
    except _Refused as e:
        raise SpecError(source, [e.problem]) from None


def _chain(data: Any, where: str, folder: Path, registry: Registry, chain: list[Path], depth: int = 0
           ) -> tuple[Any, list[Base]]:
    """:func:`with_bases` of a document read from the file ``where`` ('' for the spec itself) in ``folder``, its
    ``depth``-th base (0: the spec's own)."""
    ref = data.get("extends") if isinstance(data, Mapping) else None
    said = f"(in the base {short_text(where, 300)}) " if where else ""
    if not isinstance(ref, str) or not ref or len(ref) > limits.EXTENDS_CHARS:
        if where and ref is not None:   # the spec's own is the schema's to refuse; a base's is said here
            raise _Refused(f"{said}extends: {short(ref)} names no spec (a spec name or a .yaml path)", ref)
        return data, []
    path = _base_file(ref, folder, registry, said)
    key = path.resolve()
    if chain and key == chain[-1]:
        raise _Refused(f"{said}a spec cannot extend itself", ref)
    if key in chain:
        raise _Refused(f"{said}{short_text(path, 300)} extends, through its bases, a spec of this chain: bases cannot "
                       "loop", ref)
    if depth == limits.EXTENDS_DEPTH:
        raise _Refused(f"{said}more than {limits.EXTENDS_DEPTH} bases in one chain", ref)
    try:
        text = read_text(path)
        document = load_yaml_text(text, str(path))
    except NotFound as e:   # removed since it was found
        raise _Refused(f"{said}{e}", ref) from None
    except SpecError as e:   # the base's own file: its problems, said as this spec's at extends
        raise _Refused(f"{said}the base {short_text(path, 300)} does not read: " + "; ".join(
            f"{q.path + ': ' if q.path else ''}{q.message}" + (f" (line {q.line})" if q.line else "")
            for q in e.problems[:3]), ref) from None
    if not isinstance(document, Mapping):
        raise _Refused(f"{said}the base {short_text(path, 300)} holds no mapping of spec fields", ref)
    if (what := model_config(document)) is not None:
        raise _Refused(f"{said}the base {short_text(path, 300)} is {what}. {MODEL_CONFIG_FIX}", ref)
    own = {k: v for k, v in document.items() if k not in OWN}
    if isinstance(own.get("checkpoints"), Mapping):
        own["checkpoints"] = {k: _rebased(v, path.parent.absolute()) for k, v in own["checkpoints"].items()}
    base, further = _chain(own | {"extends": document.get("extends")}, str(path), path.parent, registry,
                           chain + [key], depth + 1)
    base = {k: v for k, v in base.items() if k not in OWN}
    return merged(base, data), [Base(str(path), yaml_places(text), own)] + further


def _base_file(ref: str, folder: Path, registry: Registry, said: str) -> Path:
    """The file ``extends: ref`` names: a path (a .yaml / .yml name, or one with a folder) relative to ``folder``,
    else a registered spec's file."""
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        path = folder / ref
        try:
            if path.is_file():
                return path
            what = no_file(path)
        except OSError as e:   # a name too long for the file system
            what = f"cannot be read ({e.strerror})"
        stem = Path(ref).stem
        hint = (f" (the built-in or plugin spec {stem!r} is named without .yaml: extends: {stem})"
                if "/" not in ref and registry.has_spec(stem) else "")
        raise _Refused(f"{said}the base spec file {short_text(path, 300)} {what}{hint}", ref)
    if registry.has_spec(ref):
        try:
            return registered_file(ref, registry)
        except DraftsmithError as e:   # a plugin's file missing, a name two spec folders give
            raise _Refused(f"{said}{e}", ref) from None
    names = [name for name, _ in registry.spec_names()]
    raise _Refused(f"{said}no spec of that name (a path is a .yaml file, relative to the spec's own file, or to the "
                   "working folder for a spec given as data)", ref, allowed=short_list(names, 30, 600),
                   hint=(suggest(ref, names) or near_file(folder / ref)).strip())


def _rebased(ref: Any, folder: Path) -> Any:
    """A base's checkpoint folder as the spec reads it: a relative one made absolute from the base's own folder."""
    from draftsmith import hub

    if not isinstance(ref, str) or not ref or hub.cache_name(ref) is not None or Path(ref).is_absolute():
        return ref
    return str(folder / ref)


def merged(base: Any, spec: Any) -> Any:
    """``spec`` written over ``base``: mappings merged key by key, unless they name another ``kind`` (quant: another
    ``method``); anything else replaced."""
    if not (isinstance(base, Mapping) and isinstance(spec, Mapping) and _same_kind(base, spec)):
        return spec
    return {**base, **{k: merged(base[k], v) if k in base else v for k, v in spec.items()}}


KINDS = ("kind", "method")   # what names a component (quant's method): another one's params are not this one's


def _same_kind(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two mappings are one component's (or no component's): no ``kind`` (or ``method``) that differs."""
    return all(a.get(k, b.get(k)) == b.get(k, a.get(k)) for k in KINDS)


def inherited(problems: Sequence[Problem], data: Any, bases: Sequence[Base], source: str,
              text: str | None) -> list[Problem]:
    """``problems`` of the merged document with each one in a value a base gave (:func:`origin` of its path among
    the spec's own document ``data`` and its bases') said at the spec's ``extends`` line (in its ``text``, else its
    file ``source``'s), naming the base's file and line; the others as they are."""
    found = base_places([p.path for p in problems if p.line is None], data, bases, source, text)

    def placed(p: Problem) -> Problem:
        if p.line is not None or (where := found.get(p.path)) is None:
            return p
        at, said = where
        return replace(p, message=f"{p.message} ({said})", line=at[0] if at else None, column=at[1] if at else None)
    return [placed(p) for p in problems]


def base_places(paths: Sequence[str], data: Any, bases: Sequence[Base], source: str,
                text: str | None) -> dict[str, tuple[Place | None, str]]:
    """For each of ``paths`` in a value a base gave (as :func:`inherited` reads them): the spec's ``extends`` line
    (None where its text says none), and the words naming the base's file and line (and the alias the value came
    through, as that file says it)."""
    if not bases:
        return {}
    own = own_places(source, text)
    at = own.place("extends", False)[0] if own is not None else None   # through a merge key (<<: {extends: b})
    documents = [data] + [b.data for b in bases]
    out = {}
    for path in paths:
        if (i := origin(documents, path)) == 0:
            continue
        base = bases[i - 1]
        line, note = base.places.place(path, True)   # note: the alias a value came through, as a file says it
        out[path] = at, f"from the base {short_text(base.source, 300)}" + (f", line {line[0]}" if line else "") + (
            f", {note}" if note else "")
    return out


@dataclass(frozen=True)
class Inheritance:
    """What a loaded spec keeps of its bases to say a problem found later (against its checkpoints) in a value they
    gave as loading says one (:func:`inherited`); compared by value, as the spec is."""
    data: Any
    bases: tuple[Base, ...]
    source: str
    text: str | None

    def __call__(self, problems: Sequence[Problem]) -> list[Problem]:
        return inherited(problems, self.data, self.bases, self.source, self.text)

    def places(self, paths: Sequence[str]) -> dict[str, tuple[Place | None, str]]:
        return base_places(paths, self.data, self.bases, self.source, self.text)


def origin(documents: Sequence[Any], path: str) -> int:
    """Which of ``documents`` (a spec's own, then its bases', nearest first) the merged value at dotted ``path``
    comes from: down the path, the documents whose values the merge keeps (the nearest one's, and below it those a
    mapping of its kind is merged into, up to one it replaces); where a key is nowhere, the nearest that wrote its
    parent (a missing field is that mapping's)."""
    live = list(range(len(documents)))
    nodes = dict(enumerate(documents))
    for part in (path.split(".") if path else []):
        holders = [i for i in live if isinstance(nodes[i], Mapping) and part in nodes[i]]
        if not holders:
            return live[0]
        kept: list[int] = []
        value: Any = None
        for i in reversed(holders):   # as the merge goes: the farthest base first, each nearer one over it
            mine = nodes[i][part]
            kept = kept + [i] if kept and isinstance(value, Mapping) and isinstance(mine, Mapping) and \
                _same_kind(value, mine) else [i]
            value = merged(value, mine) if len(kept) > 1 else mine
        live = sorted(kept)
        nodes = {i: nodes[i][part] for i in live}
    return live[0]


def own_places(source: str, text: str | None) -> Places | None:
    """Where each path of the spec's own YAML is written: its ``text``, else its file ``source``'s; None for a spec
    given as data (a label, not a file)."""
    if text is None:
        try:
            text = read_text(Path(source))
        except (OSError, SpecError):
            return None
    return yaml_places(text)


def changes(base: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """The least a spec extending ``base`` writes to be ``data``: what differs, a mapping of one kind by key, one of
    another kind whole. ``merged(base, changes(base, data)) == data`` unless ``data`` leaves out a key of a mapping
    the merge keeps (no spec text can: the caller checks and writes such a document whole)."""
    if not _same_kind(base, data):
        return dict(data)   # another component than the base's: written whole
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in base:
            out[key] = value
        elif isinstance(value, Mapping) and isinstance(base[key], Mapping):
            if sub := changes(base[key], value):
                out[key] = sub
        elif value != base[key]:
            out[key] = value
    return out


def base_file(spec, registry: Registry) -> Path:
    """The file of the base a loaded spec extends (``spec.extends``, read as :func:`with_bases` reads it); a
    DraftsmithError where there is none."""
    return _base_file(spec.extends, _folder(_file(spec.source)), registry, "")


def _file(source: str) -> Path | None:
    """The spec's own file, or None where ``source`` is a label (a spec given as data; one too long for a file name)."""
    try:
        return Path(source) if Path(source).is_file() else None
    except OSError:
        return None


def _folder(file: Path | None) -> Path:
    """What a spec's ``extends`` path is relative to: its file's folder, else the working folder."""
    return file.parent if file is not None else Path.cwd()
