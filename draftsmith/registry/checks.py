"""The records a plugin returns, checked against the contract (draftsmith.hooks) when its plugin registers, so a
mistake is named with its plugin at start-up instead of surfacing as an internal error when a spec is used."""
from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Container, Iterable, Mapping
from pathlib import Path
from typing import Any

import pluggy
from pydantic import BaseModel

from draftsmith import limits
from draftsmith.errors import DraftsmithError, short, short_text, suggest
from draftsmith.hooks import Component, SpecSource
from draftsmith.hooks.records import SPEC_NAME
from draftsmith.hooks.kinds import KINDS


# what a plugin's code may raise that is said as that plugin's failure: SystemExit too (a version guard's
# sys.exit("needs ..."), an argparse parse_args() left at module level), which would end every command with the
# plugin's own text and no "error:" line; KeyboardInterrupt (Ctrl-C) passes
PLUGIN_FAULTS = (Exception, SystemExit)


def deepest_frame(exc: BaseException, packages: Container[str]) -> tuple[str, str] | None:
    """(its module, "module.function, line N") of ``exc``'s deepest frame in one of the top-level ``packages``,
    or None: where a plugin's code raised it."""
    import traceback

    for frame, line in reversed(list(traceback.walk_tb(exc.__traceback__))):
        if (name := frame.f_globals.get("__name__", "")).partition(".")[0] in packages:
            return name, f"{name}.{frame.f_code.co_qualname}, line {line}"
    return None


def raised(exc: BaseException, code: Any = None) -> str:
    """"Type: message" of what a plugin's code raised, with where in that code, "(in pkg.mod.func, line N)": the
    :func:`deepest_frame` in ``code``'s top-level package (``code``: the plugin's function or class, or its
    module's name; none for pluggy's hook callers, which call every plugin's wrappers), so its author finds the line
    without --debug. An AttributeError gets the closest attribute, as Python's traceback gives it (a factory's
    ``dims.intermediate_size``: Did you mean 'intermediate'?)."""
    said = f"{type(exc).__name__}: {short_text(str(exc), 300)}"
    if isinstance(exc, AttributeError) and isinstance(getattr(exc, "name", None), str):   # Python's hint, not in str()
        with contextlib.suppress(Exception):   # an object whose dir() raises gets none
            if hint := suggest(exc.name, [a for a in dir(exc.obj) if not a.startswith("_")]):
                said += f".{hint}"
    top = str((code if isinstance(code, str) else getattr(code, "__module__", None)) or "").partition(".")[0]
    if top in ("", "draftsmith", "pluggy") or isinstance(exc, SyntaxError):   # a SyntaxError's text says where
        return said
    found = deepest_frame(exc, {top})
    return said if found is None else f"{said} (in {found[1]})"


class PluginError(DraftsmithError, RuntimeError):
    """A plugin does not keep the contract of draftsmith.hooks: it cannot be imported, its hooks do not match the
    hookspecs, a hook raised or returned what the contract does not allow."""


class PluginClash(PluginError):
    """Two plugins provide the same (kind, name) or the same spec name: raised when the registry is built (plugins
    are code). A spec name that files of the spec folders take again is one too, raised only where that name is
    looked up (:meth:`Registry.spec_source`): a user's folder never stops a command about another spec."""


def record_problem(record: Any, record_type: type) -> str | None:
    """Why ``record`` breaks the contract of ``record_type``, or None."""
    if not isinstance(record, record_type):
        return f"expected draftsmith.hooks.{record_type.__name__} records"
    return component_problem(record) if isinstance(record, Component) else spec_source_problem(record)


HOLDS_READ = ("fusion", "attention")   # the kinds whose Component.holds assembler/fit.py asks


def component_problem(comp: Component) -> str | None:
    if not isinstance(comp.kind, str) or comp.kind not in KINDS:
        return (f"kind {comp.kind!r} is none the assembler asks for.{suggest(str(comp.kind), KINDS)} "
                f"kinds: {', '.join(KINDS)} (draftsmith.hooks.kinds)")
    kind = KINDS[comp.kind]
    if not isinstance(comp.name, str) or not comp.name.strip():
        return "the name must be a non-empty string (a spec names the component by it)"
    if comp.name in kind.reserved:
        return (f"the name {comp.name!r} is a spec's own word (`{comp.kind}: {{{kind.key}: {comp.name}}}` is "
                f"{kind.reserved[comp.name].meaning}), so a spec could never "
                f"build this {comp.kind}: rename it")
    if not isinstance(comp.doc, str):
        return "doc must be a string, '' for none (draftsmith list shows it)"
    if not callable(comp.factory):
        return f"the factory must be callable: the assembler calls a {comp.kind}'s as {kind.call}"
    if comp.holds is not None and not callable(comp.holds):
        return "holds must be callable (holds(params dict) -> regexes of the canonical names it may hold) or None"
    if comp.holds is not None and comp.kind not in HOLDS_READ:
        return (f"holds is read for a {' or '.join(HOLDS_READ)} only (what inspect places a checkpoint's names by); "
                f"a {comp.kind}'s would be ignored: leave it out")
    if comp.reads is not None and not callable(comp.reads):
        return ("reads must be callable (reads(params, draft config dict) -> the values its auto params take, "
                "by field name) or None")
    if not (isinstance(comp.params, type) and issubclass(comp.params, BaseModel)):
        return "params must be a pydantic model class (its fields are the keys a spec may give the component)"
    if comp.params.model_config.get("extra") != "forbid":
        return (f"params model {comp.params.__name__} must refuse unknown keys, or a misspelt key in a spec is "
                "silently ignored: set model_config = ConfigDict(extra='forbid') on it")
    if (field := python_only_field(comp.params)) is not None:
        return (f"params model {comp.params.__name__} has a field {field} whose value must be a Python object; a "
                "spec gives plain data (strings, numbers, true/false, lists, mappings), so none could set it: give "
                "it a plain type and build the object in the factory")
    if kind.key is None and comp.params.model_fields:
        fields = ", ".join(map(repr, comp.params.model_fields))
        return (f"params model {comp.params.__name__} has fields ({fields}), but a spec names a {comp.kind} alone "
                f"and never gives it params (its factory is called as {kind.call}), so none could be set: leave "
                "params out, or make them constants of the factory")
    if kind.key is not None and (field := selector_field(comp.params, kind.key)) is not None:
        return (f"params model {comp.params.__name__} has a field {field}, but {kind.key!r} is the key a spec "
                f"names the {comp.kind} by ({{{kind.key}: {comp.name}, ...}}), so a spec can never give it: "
                "rename the field")
    return None


def python_only_field(params: type[BaseModel]) -> str | None:
    """The params field, quoted, whose validation needs a Python object (an ``isinstance`` check: a torch.Tensor
    field of a model allowing arbitrary types), which a spec's plain data, validated as JSON
    (:func:`draftsmith.specs.schema.validate_strict`), can never pass; None where every field takes plain data."""
    def needs_object(schema: Any) -> bool:
        if isinstance(schema, dict):
            if schema.get("type") == "is-instance":
                return True
            if schema.get("type") == "json-or-python":   # JSON input takes its json branch only
                return needs_object(schema.get("json_schema"))
            return any(needs_object(v) for v in schema.values())
        if isinstance(schema, (list, tuple)):
            return any(needs_object(v) for v in schema)
        return False

    fields = _fields_schema(getattr(params, "__pydantic_core_schema__", {}))
    return next((repr(name) for name, field in fields.items() if needs_object(field)), None)


def _fields_schema(schema: Any) -> dict[str, Any]:
    """A model's core schema's fields (name -> schema), wherever pydantic nests them."""
    if isinstance(schema, dict):
        if schema.get("type") == "model-fields":
            return dict(schema.get("fields", {}))
        for key in ("schema", "definitions"):
            inner = schema.get(key)
            for part in (inner if isinstance(inner, list) else [inner]):
                if found := _fields_schema(part):
                    return found
    return {}


def selector_field(params: type[BaseModel], key: str) -> str | None:
    """The params field a spec would give as ``key`` (by its name or an alias), quoted, or None."""
    for name, info in params.model_fields.items():
        if key in (name, info.alias, info.validation_alias):   # an AliasChoices / AliasPath is left to pydantic
            return repr(name) if name == key else f"{name!r} (alias {key!r})"
    return None


def spec_source_problem(src: SpecSource) -> str | None:
    if not isinstance(src.name, str) or not src.name.strip():
        return "the name must be a non-empty string (draftsmith.load_spec(name) finds the spec by it)"
    if not re.fullmatch(SPEC_NAME, src.name) or len(src.name) > limits.NAME_CHARS:
        return (f"the name must be one a spec file may give as its name: (lowercase letters, digits, '.', '_' and "
                f"'-', starting with a letter or digit, at most {limits.NAME_CHARS} characters), as the file says it")
    if not isinstance(src.path, Path):
        return ("path must be a pathlib.Path to the YAML file, e.g. Path(__file__).parent / 'my-spec.yaml' "
                "(a relative string would be read against the current directory)")
    return None


def brief(record: Any) -> str | None:
    """A returned record as a message names it: its first two fields (a Component's kind and name, which a cut
    repr hid behind its factory's); None for anything that is no record instance (a class, a tuple)."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        return None
    fields = dataclasses.fields(record)
    first = [f"{f.name}={short(getattr(record, f.name))}" for f in fields[:2]] + ["..."] * (len(fields) > 2)
    return f"{type(record).__name__}({', '.join(first)})"


def collected(impl: pluggy.HookImpl, record_type: type) -> list:
    """What one plugin's collecting hook returned, each record checked against the contract (draftsmith.hooks)."""
    hook = f"{impl.function.__name__} of plugin {impl.plugin_name!r}"
    if impl.hookwrapper or getattr(impl, "wrapper", False):
        raise PluginError(f"{hook} is a hook wrapper; the registry calls each plugin's {impl.function.__name__} "
                          "on its own, to know who provides each record, so there is no call to wrap: return the "
                          "records from a plain @hookimpl")
    try:
        returned = impl.function()
        if isinstance(returned, (str, bytes, Mapping, record_type)) or not isinstance(returned, Iterable | None):
            raise PluginError(f"{hook} returned {brief(returned) or short(returned)}; it returns a list of "
                              f"draftsmith.hooks.{record_type.__name__} records")
        records = [] if returned is None else list(returned)   # a generator's raise is the plugin's too
    except DraftsmithError:
        raise
    except PLUGIN_FAULTS as e:
        raise PluginError(f"{hook} raised {raised(e, impl.function)}") from e
    for i, r in enumerate(records):   # an item is named as one, by its type (short() quotes a tuple as a list)
        if (why := record_problem(r, record_type)) is not None:
            what = brief(r) or f"a {type(r).__name__}, {short(r)}"
            raise PluginError(f"{hook} returned a list whose item {i} is {what}: {why}")
    return records
