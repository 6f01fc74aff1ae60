"""Reading specs: YAML (safe constructors only) -> phase 1 (pydantic, strict) + phase 2 (registry) -> one SpecError.

A spec file is untrusted input. Before pydantic sees it, it must be a regular file of at most ``SPEC_BYTES``
of UTF-8 text, nest at most ``YAML_DEPTH`` levels and expand (aliases followed) to at most ``YAML_NODES`` nodes,
with no duplicate keys and only JSON-like values (mappings, lists, strings, numbers, booleans, null). Each
refusal is a SpecError naming the file, so nothing hangs, recurses without bound or grows a message past a
screenful (draftsmith/limits.py).
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from draftsmith import limits
from draftsmith.errors import OptionError, Problem, SpecError, short_text, with_places
from draftsmith.registry import Registry, default_registry
from draftsmith.specs.documents import (MODEL_CONFIG_FIX, RepeatedKeys, load_yaml_text, model_config, provider_fix,
                                        read_text, spec_file, spec_path, without_plugin)
from draftsmith.specs.extends import Inheritance, inherited, with_bases
from draftsmith.specs.placement import placed
from draftsmith.specs.resolve import check_spec_data
from draftsmith.specs.schema import Spec, too_many_digits, validate_strict
from draftsmith.specs.translate import describe, problems_from
from draftsmith.yaml_places import yaml_places


def load_spec(ref: Spec | str | Path, registry: Registry | None = None) -> Spec:
    """A built-in or plugin spec name, a YAML path, or a Spec (returned as is, once :func:`checked_object` finds
    nothing an edit of it set unchecked)."""
    if isinstance(ref, Spec):
        return checked_object(ref)
    if not isinstance(ref, (str, os.PathLike)):   # load_spec(3): not Path()'s TypeError
        raise OptionError(f"spec: a spec name, a YAML file's path or a Spec, got the {type(ref).__name__} "
                          f"{short_text(repr(ref), 100)}" + ("; a mapping of spec fields is a Spec by "
                                                             "draftsmith.parse_spec(data)" if isinstance(ref, Mapping)
                                                             else ""))
    path = spec_file(ref)   # a file's problem said before the registry is built (its components import torch)
    registry = checked_registry(registry)
    path = path if path is not None else spec_path(ref, registry)
    text = read_text(path)
    try:
        data = load_yaml_text(text, str(path))   # its own errors say their line
    except RepeatedKeys as e:   # said with the rest of the document's problems
        try:
            parse_spec(e.data, source=str(path), registry=registry, text=text)
        except SpecError as more:
            said = {p.path for p in e.problems}
            raise SpecError(str(path), e.problems + [p for p in more.problems if p.path not in said]) from None
        raise
    spec = parse_spec(data, source=str(path), registry=registry, text=text)   # each problem at its line in text
    if str(ref) in registry.specs and spec.name != str(ref):
        raise SpecError(str(path), with_lines([name_mismatch(str(ref), spec.name, registry)], text))
    return spec


def checked_object(spec: Spec) -> Spec:
    """``spec``, or a SpecError with every problem of the values an edit of the object set unchecked, said as a
    file's are: pydantic's ``model_copy(update=...)`` validates nothing (a dict where the ``decoding`` or
    ``draft.share`` section belongs failed later as an AttributeError; ``num_layers='x'`` as a TypeError). The
    schema's checks only: what needs the registry (component names, their params) the load checks with the registry
    it is given. The decoding values :meth:`Spec.with_decoding` set are left to the load's own check of that
    section, which says them."""
    import warnings

    from draftsmith.specs.schema import Decoding

    with warnings.catch_warnings():   # pydantic warns of a section that is not its model: said below instead
        warnings.simplefilter("ignore")
        data = spec.model_dump()
    try:
        validate_strict(Spec, data)
        problems = []
    except ValidationError as e:
        problems = [p for p in problems_from(e, "", Spec)
                    if not (p.path.startswith("decoding") and isinstance(spec.decoding, Decoding))]
    problems += _unvalidated(spec)
    if problems:   # not placed in the spec's file: the values are not the file's
        raise SpecError(f"spec {spec.name!r} as edited (from {spec.source})", problems)
    return spec


def _unvalidated(model: BaseModel, path: str = "") -> list[Problem]:
    """A problem for each section of ``model`` (nested) that holds a mapping where its model belongs."""
    import typing

    out = []
    for name, field in type(model).model_fields.items():
        value, where = getattr(model, name, None), f"{path}.{name}" if path else name
        kinds = typing.get_args(field.annotation) or (field.annotation,)
        if isinstance(value, BaseModel):
            out += _unvalidated(value, where)
        elif isinstance(value, Mapping) and any(isinstance(k, type) and issubclass(k, BaseModel) for k in kinds):
            out.append(Problem(where, f"holds the {type(value).__name__} {short_text(repr(value), 100)}, not its "
                                      "section (an edit that skipped validation, as model_copy(update=...))",
                               hint="Edit a Spec with spec.with_decoding(...), or parse its edited "
                                    "spec.model_dump() with draftsmith.parse_spec"))
    return out


def checked_registry(registry: Any) -> Registry:
    """``registry``, or the default one for None; anything else is an OptionError naming the argument."""
    if registry is None:
        return default_registry()
    if not isinstance(registry, Registry):
        raise OptionError(f"registry: a draftsmith Registry (draftsmith.build_registry()) or None, got the "
                          f"{type(registry).__name__} {short_text(repr(registry), 100)}")
    return registry


def name_mismatch(name: str, says: str, registry: Registry) -> Problem:
    """The problem of the registered spec ``name`` whose file's name: ``says`` another: a plugin's SpecSource name
    must equal its file's name:, which the plugin changes (either side, as long as they agree)."""
    said = f"the file says {says!r} but is registered as {name!r} by {registry.spec_provider(name)}"
    if registry.specs[name].folder:
        return Problem("name", said, hint=provider_fix(name, registry))
    return Problem("name", f"{said} (its draftsmith_specs hook's SpecSource name)",
                   hint=f"The plugin must give both one name: name: {name} in this file (the name it registers, "
                        f"which `draftsmith list` shows), or SpecSource({says!r}, ...) in its draftsmith_specs hook; "
                        f"{without_plugin(name, registry)}.")


def with_lines(problems: list[Problem], text: str) -> list[Problem]:
    """``problems`` with the line of the YAML ``text`` each path reaches: the key of the deepest part of the path
    that is in the file (an unknown key's own line; a missing key's parent's; the top's at worst); a path through an
    alias (``b: *a``) the alias's line, saying where the anchor and the value are (:mod:`draftsmith.yaml_places`)."""
    return with_places(problems, yaml_places(text), top=True)



_SCALARS = (str, int, float, bool, type(None))


class _Refused(Exception):
    def __init__(self, problem: Problem):
        self.problem = problem


def _long_int(path: str, x: int) -> Problem:
    return Problem(path, f"an integer of more than {limits.INT_DIGITS} digits; a spec's numbers are far smaller",
                   found=x)


def check_plain_data(data: Any) -> tuple[list[Problem], bool]:
    """(problems, whether the walk went through the whole document). A value that refers to itself, a tree
    (aliases expanded) deeper than ``YAML_DEPTH`` or larger than ``YAML_NODES`` ends the walk (the one problem,
    False); a value that is not JSON-like, an integer of more than ``INT_DIGITS`` digits (Python would not print it:
    json and every message need that), a mapping key that is no string are each said, and the walk goes on: one
    does not hide the next. Shared sub-trees are measured once, so an alias bomb is refused in time linear in the
    file."""
    sizes: dict[int, tuple[int, int]] = {}      # id -> (nodes, height) of a measured container
    active: set[int] = set()
    found: list[Problem] = []

    def walk(x: Any, path: str, level: int) -> tuple[int, int]:
        if isinstance(x, _SCALARS):
            if too_many_digits(x):
                found.append(_long_int(path, x))
            return 1, 0
        if not isinstance(x, (Mapping, list, tuple)):
            kind = {"date": "a YAML timestamp", "datetime": "a YAML timestamp", "bytes": "YAML binary",
                    "set": "a YAML set"}.get(type(x).__name__, f"a {type(x).__name__}")
            quote = " (quote it: '...')" if kind == "a YAML timestamp" else ""
            found.append(Problem(path, f"{kind} is not allowed in a spec; write a string{quote}, number, "
                                       "true/false, null, a list or a mapping", found=x))
            return 1, 0
        if level > limits.YAML_DEPTH:
            raise _Refused(Problem(path, f"nesting deeper than {limits.YAML_DEPTH} levels (aliases expanded)"))
        if id(x) in active:
            raise _Refused(Problem(path, "the value contains itself (a recursive YAML alias)"))
        if id(x) not in sizes:
            active.add(id(x))
            nodes, height = 1, 1  # a container is a level even when empty (as in load_yaml_text)
            items = x.items() if isinstance(x, Mapping) else enumerate(x)
            for key, value in items:
                if isinstance(x, Mapping) and (not isinstance(key, _SCALARS) or too_many_digits(key)):
                    found.append(Problem(path, "a mapping key must be a string", found=key))
                    continue
                n, h = walk(value, _child(path, key), level + 1)
                nodes, height = nodes + n, max(height, h + 1)
                if nodes > limits.YAML_NODES:
                    raise _Refused(Problem(path, f"more than {limits.YAML_NODES} values with every alias "
                                                 "expanded (a spec has about 50)"))
            active.discard(id(x))
            sizes[id(x)] = (nodes, height)
        nodes, height = sizes[id(x)]
        if level + height > limits.YAML_DEPTH:
            raise _Refused(Problem(path, f"nesting deeper than {limits.YAML_DEPTH} levels (aliases expanded)"))
        return nodes, height

    try:
        walk(data, "", 0)
    except _Refused as r:
        return [r.problem], False
    return found, True


def _child(path: str, key: Any) -> str:
    """The dotted path of ``key`` in the mapping at ``path``."""
    return f"{path}.{key}" if path else str(key)


def without(data: Any) -> Any:
    """``data`` without what check_plain_data refused (a copy of its mappings): keys that are no strings and values
    that are no plain data (a timestamp, a set, an integer too long to print) are taken out, each mapping's other
    entries kept, so that validation still says their problems (a mapping with one non-string key was dropped
    whole, and the problems inside it unsaid); a list is left as it is (validation says its items)."""
    def plain(x: Any) -> bool:
        return isinstance(x, (Mapping, list, tuple)) or (isinstance(x, _SCALARS) and not too_many_digits(x))

    def copy(x: Any) -> Any:
        if isinstance(x, Mapping):
            return {k: copy(v) for k, v in x.items() if isinstance(k, str) and plain(v)}
        return x

    return copy(data)


def parse_spec(data: Any, *, source: str = "<spec>", registry: Registry | None = None,
               text: str | None = None) -> Spec:
    """A spec from its YAML data, or one SpecError with every problem. ``text``, the YAML the data was read from
    (load_spec gives it), places each problem (:func:`with_lines`, aliases included); without it, a SpecError
    places them from the file ``source`` names, if it is one."""
    if not isinstance(source, str):   # a spec's source is its file's path, or a label for messages
        raise OptionError(f"source: a str (the spec's file, or a label such as '<spec>'), got the "
                          f"{type(source).__name__} {short_text(repr(source), 100)}")
    registry = checked_registry(registry)
    try:
        whole, bases = with_bases(data, source, registry)   # extends: its bases merged in
    except SpecError as e:   # a base that cannot be taken: this file alone is no spec to judge (its kinds: the base's)
        raise SpecError(source, e.problems if text is None else with_lines(e.problems, text)) from None
    spec, problems = _checked(whole, registry)
    if problems:
        problems = inherited(problems, data, bases, source, text)   # a base's value: said at extends, naming it
        raise SpecError(source, problems if text is None else with_lines(problems, text))
    spec._source = source
    if bases:   # a problem the load finds later (against the checkpoints) in a base's value: said as these are
        spec._inherited = Inheritance(data, tuple(bases), source, text)
    return spec


def _checked(data: Any, registry: Registry) -> tuple[Spec | None, list[Problem]]:
    """(the spec, []) or (None or a spec, its problems): phase 1 (pydantic) and phase 2 (the registry)."""
    if not isinstance(data, Mapping):
        what = "the document is empty" if data is None else f"the document is a {type(data).__name__}"
        return None, [Problem("", f"{what}; a spec is a mapping of fields", allowed=describe(Spec))]
    if (what := model_config(data)) is not None:
        return None, [Problem("", f"the document is {what}", hint=MODEL_CONFIG_FIX)]
    refused, whole = check_plain_data(data)
    if not whole:
        return None, refused   # the walk ended there: nothing past it was looked at
    if refused:
        data = without(data)
    shape: list[Problem] = []
    spec = None
    try:
        spec = validate_strict(Spec, data)
    except ValidationError as e:
        shape = problems_from(e, "", Spec)
    names = check_spec_data(data, registry)
    # Phase 2 knows the registry, so where both phases speak about one path, its account (with the names that
    # exist and who provides them) replaces pydantic's.
    found = placed([p for p in shape if p.path not in {q.path for q in names}] + names, data, registry)
    if refused:   # the values taken out: a field they left missing is not news
        said = {p.path for p in refused}
        return None, refused + [p for p in found if p.path not in said]
    return spec, found


_NAME_CHARS = re.compile(r"[^a-z0-9._-]+")


def spec_name_for(text: str) -> str:
    """A valid spec name made from any text (a folder name with spaces or accents): lower case, runs of other
    characters become '-', at most ``NAME_CHARS`` characters, starting with a letter or digit."""
    name = _NAME_CHARS.sub("-", text.lower()).strip("-._")[: limits.NAME_CHARS].rstrip("-._")
    return name or "draft"


def list_specs(registry: Registry | None = None) -> list[str]:
    return [name for name, _ in checked_registry(registry).spec_names()]
