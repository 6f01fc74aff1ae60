"""pydantic's validation errors, translated into spec Problems: dotted spec paths, what was found, what is allowed.

pydantic names union members in its error locations (``aux_layers.literal['auto']``, ``aux_layers.AuxLayers.at``)
and reports one error per member. A spec author wrote neither tag, so the tags are dropped from the path; when
the value had the shape of one member (a mapping for a model), only that member's errors are kept, otherwise
the members' errors become one problem that lists every accepted form.
"""
from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from draftsmith.errors import Problem, either, short, short_text, spec_word, suggest
from draftsmith.specs.schema import is_stand_in

_UNIONS = (typing.Union, types.UnionType)
_NO_MEMBER = object()
_BOUNDS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}


def problems_from(error: ValidationError, prefix: str, model: type[BaseModel],
                  word: Callable[[Any], str] = spec_word, data: Any = None) -> list[Problem]:
    """Every error of ``error`` (raised validating ``model``) as Problems under the dotted ``prefix``, a value found
    said by ``word`` (YAML's null / true / false; generate()'s arguments, Python's :func:`short`). ``data``: what was
    validated, where it may hold values that are not plain data (a caller's tensor or numpy scalar), so that such a
    value is said as given, not as the stand-in :func:`validate_strict` validates in its place."""
    walked = [(_walk(err["loc"], model), {**err, "input": _given(data, err["loc"], err.get("input"))})
              for err in error.errors()]
    deep_unions = {w.union for w, _ in walked if w.union is not None and w.path != w.union}
    out: list[Problem] = []
    merged: dict[tuple[str, ...], list[tuple[_Walk, Mapping[str, Any]]]] = {}
    for w, err in walked:
        if w.union is None or w.path != w.union:
            out.append(_problem(err, w, prefix, word))
        elif w.union not in deep_unions:  # the value fit no member's shape: one problem listing all members
            merged.setdefault(w.union, []).append((w, err))
    for path, errs in merged.items():
        found = errs[0][1].get("input")
        forms = " or ".join(dict.fromkeys(_allowed(w, e) for w, e in errs))
        words = [str(a) for w, _ in errs for a in typing.get_args(w.member) if isinstance(a, str)]
        words += ["true", "false"] if any(w.member is bool for w, _ in errs) else []
        out.append(Problem(_join(prefix, path), f"{word(found)} is not allowed", allowed=forms,
                           hint=_suggest(found, words)))
    return out


def _given(data: Any, loc: Sequence[Any], found: Any) -> Any:
    """The value at ``loc`` in ``data`` where pydantic found validate_strict's stand-in for it (or for an item of it:
    ``[tensor(3)]``), else ``found``; the string parts of ``loc`` that name no key (a union member's tag) are no
    step."""
    if not _holds_stand_in(found) or data is None:
        return found
    node = data
    for part in loc:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, (list, tuple)) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif not isinstance(part, str):
            return found
        # else a union member's tag ('constrained-int'), or the key a missing field's error names: no step in data
    return node


def _holds_stand_in(value: Any) -> bool:
    if is_stand_in(value):
        return True
    items = value.values() if isinstance(value, Mapping) else value if isinstance(value, (list, tuple)) else ()
    return any(_holds_stand_in(v) for v in items)


def _allowed(w: _Walk, err: Mapping[str, Any]) -> str:
    """What the value should have been, in spec words."""
    kind, ann = err["type"], (w.member if w.member is not None else w.field_ann)
    if (kind.endswith(("_type", "_parsing")) or kind == "literal_error") and ann is not None:
        return describe(ann)
    if kind in _BOUNDS:
        return f"{describe(ann)} {_BOUNDS[kind]} {next(iter(err.get('ctx', {}).values()), '?')}"
    if kind == "string_too_short":
        n = err.get("ctx", {}).get("min_length", 1)
        return "a non-empty string" if n == 1 else f"a string of at least {n} characters"
    if kind == "string_pattern_mismatch":
        return f"a string matching {err.get('ctx', {}).get('pattern')}"
    return _should_be(err)


def _suggest(found: Any, words: Sequence[str]) -> str:
    if not isinstance(found, str):
        return ""
    if found.lower() in ("true", "false") and found.lower() in words:   # "True" in quotes: a string, not a boolean
        return f"Write {found.lower()} without quotes (in quotes it is a string)"
    if EXPONENT.fullmatch(found):   # 5e5, 1e-6: numbers to the user, strings to YAML 1.1 (a dot and a sign needed)
        return f"YAML reads {found} as a string; write the number as {yaml_float(found)}"
    return suggest(found, words)


EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def yaml_float(text: str) -> str:
    """``text`` (a float in exponent form) as YAML 1.1 reads a float: a dot in the mantissa, a sign on the exponent."""
    written = repr(float(text))
    if "e" not in written:
        return written
    mantissa, exponent = written.split("e")
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent if exponent[0] in '+-' else '+' + exponent}"


@dataclass(frozen=True)
class _Walk:
    path: tuple[str, ...]                 # the spec keys, union tags dropped
    union: tuple[str, ...] | None         # where the last union was entered, if any
    parent: type[BaseModel] | None        # the model holding the last key
    field_ann: Any                        # the last key's annotation (None when unknown)
    member: Any = None                    # the union member an error belongs to


def _walk(loc: Sequence[Any], model: type[BaseModel] | None) -> _Walk:
    """Drop union-member tags from ``loc``, following the models it passes through."""
    path: list[str] = []
    ann: Any = model
    union = parent = member = None
    extras: tuple = ()          # the last field's Annotated extras (pydantic keeps them apart from .annotation)
    for part in loc:
        extras = ()
        members = _union_members(ann)
        if len(members) > 1 and isinstance(part, str):
            tag = _member_for_tag(part, members)
            ann = member = None if tag is _NO_MEMBER else tag
            union = tuple(path)  # a member tag, not a spec key
            continue
        path.append(str(part))
        member = None  # past the union: the error is about a key inside the member
        if isinstance(part, int):
            ann = _item(ann)
            continue
        if (value := _mapping_value(ann)) is not _NO_MEMBER:  # a key of a dict[str, X] field: on to X
            ann = value
            continue
        parent = model_in(ann)
        field = parent.model_fields.get(part) if parent else None
        ann = field.annotation if field else None
        extras = tuple(field.metadata) if field else ()
    if extras and ann is not None:
        ann = typing.Annotated[(ann, *extras)]
    return _Walk(tuple(path), union, parent, ann, member)


def _union_members(ann: Any) -> tuple[Any, ...]:
    """The members of a union pydantic tags (``X | None`` is not tagged, so None is left out)."""
    if typing.get_origin(ann) not in _UNIONS:
        return ()
    return tuple(a for a in typing.get_args(ann) if a is not type(None))


def _member_for_tag(tag: str, members: tuple[Any, ...]) -> Any:
    """The member a pydantic union tag names: ``literal['auto']``, ``AuxLayers``, ``bool``, ``constrained-int``,
    ``tuple[int, ...]``. At a union position the next location part is always such a tag."""
    for m in members:
        origin = typing.get_origin(m)
        if origin is typing.Literal:
            if tag.startswith("literal["):
                return m
            continue
        base = typing.get_args(m)[0] if origin is typing.Annotated else (origin or m)
        name = getattr(base, "__name__", None)
        if name and (tag == name or tag.startswith(name + "[") or tag.endswith("-" + name)):
            return m
    return _NO_MEMBER


def _optional_inner(ann: Any) -> Any:
    """X for ``X | None``, else ``ann`` itself."""
    members = _union_members(ann)
    return members[0] if len(members) == 1 else ann


def _item(ann: Any) -> Any:
    ann = _optional_inner(ann)
    args = [a for a in typing.get_args(ann) if a is not Ellipsis]
    return args[0] if args else None


def _mapping_value(ann: Any) -> Any:
    """X for a ``dict[K, X]`` (or ``dict[K, X] | None``) annotation, else _NO_MEMBER."""
    ann = _optional_inner(ann)
    if typing.get_origin(ann) in (dict, Mapping):
        args = typing.get_args(ann)
        return args[1] if len(args) == 2 else None
    return _NO_MEMBER


def model_in(ann: Any) -> type[BaseModel] | None:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in typing.get_args(ann):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _join(prefix: str, path: Sequence[str]) -> str:
    return ".".join(p for p in (prefix, *path) if p)


NO_KEYS = "no keys: it takes no params (sizes and eps come from the checkpoint's config.json)"
FROM_CONFIG = ("eps", "rms_norm_eps", "dim", "size", "hidden_size", "intermediate_size", "head_dim")
FROM_CONFIG_HINT = "Sizes and eps come from the checkpoint's config.json, not the spec"


def _problem(err: Mapping[str, Any], w: _Walk, prefix: str, word: Callable[[Any], str]) -> Problem:
    path, kind, found = _join(prefix, w.path), err["type"], err.get("input")
    if kind == "extra_forbidden":
        parent = sorted(w.parent.model_fields) if w.parent else []
        hint = _suggest(w.path[-1], parent) or (FROM_CONFIG_HINT if w.path[-1] in FROM_CONFIG and parent else "")
        return Problem(path, f"unknown field {short(w.path[-1])}", allowed=", ".join(parent) or NO_KEYS, hint=hint)
    if kind == "missing":   # the field's description says why it has no default
        field = w.parent.model_fields.get(w.path[-1]) if w.parent and w.path else None
        return Problem(path, "required field is missing", allowed=describe(w.field_ann),
                       hint=(field.description or "") if field else "")
    if kind in ("literal_error", "enum"):
        # a boolean literal is spelled as YAML writes it: true / false (str() would say 'True')
        choices = [str(a).lower() if isinstance(a, bool) else str(a)
                   for a in typing.get_args(w.field_ann if w.member is None else w.member)]
        return Problem(path, f"{word(found)} is not allowed", allowed=_allowed(w, err), hint=_suggest(found, choices))
    if kind == "value_error":
        message = short_text(err["msg"].removeprefix("Value error, "), 400)
        # a model's own check: the message says what of the mapping it refuses (a whole mapping said as found would be
        # Python's repr of it)
        return Problem(path, message) if isinstance(found, (Mapping, list)) else Problem(path, message, found=found)
    allowed = _allowed(w, err)
    return Problem(path, f"{word(found)} is not allowed", allowed=allowed, hint=_suggest(found, _words(allowed)))


def _words(allowed: str) -> list[str]:
    """The values an allowed phrase spells out: true / false and quoted words (``flase`` -> Did you mean 'false'?)."""
    return [a or b for a, b in re.findall(r"'([^']+)'|\b(true|false)\b", allowed)]


def _should_be(err: Mapping[str, Any]) -> str:
    msg = err["msg"]
    return msg.removeprefix("Input should be ") if msg.startswith("Input should be ") else msg


def describe(ann: Any) -> str:
    """A field's type in a spec author's words: "true or false", "'input' or 'output'", "a mapping with keys ..."."""
    if ann is None:
        return ""
    if typing.get_origin(ann) is typing.Annotated:
        base, *meta = typing.get_args(ann)
        # a validator that maps a spelling of its own onto the type (`auto` -> None) says so in ``accepts``
        extra = [w for m in meta if (w := getattr(getattr(m, "func", None), "accepts", None))]
        return ", or ".join([describe(base), *extra])
    if typing.get_origin(ann) is typing.Literal:
        return either([str(a).lower() if isinstance(a, bool) else repr(a) for a in typing.get_args(ann)])
    if members := _union_members(ann):
        return " or ".join(describe(m) for m in members if m is not type(None))
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return _mapping_form(ann)
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if ann in words:
        return words[ann]
    if typing.get_origin(ann) in (tuple, list):
        return f"{LIST_OF}{describe(_item(ann))}"
    return getattr(ann, "__name__", str(ann))


LIST_OF = "a list, each item "


def _mapping_form(model: type[BaseModel]) -> str:
    """"a mapping with keys ..." for a model. A weight rule's model names only ``kind`` (the other keys are its
    kind's), so a rule is described by every built-in kind's keys and forms: the text a ``rules`` that is not a
    list gets (schema.rule_forms), less its list words, so that the list and its items read alike."""
    from draftsmith.specs.schema import Rule, rule_forms

    if model is Rule:
        return rule_forms().removeprefix(LIST_OF)
    return f"a mapping with keys {', '.join(model.model_fields)}"
