"""The records a plugin returns, checked against the contract (draftsmith.hooks) when its plugin registers, so a
mistake is named with its plugin at start-up instead of surfacing as an internal error when a spec is used."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from draftsmith.errors import DraftsmithError, suggest
from draftsmith.hooks import Component, SpecSource
from draftsmith.hooks.kinds import KINDS


class PluginError(DraftsmithError, RuntimeError):
    """A plugin does not keep the contract of draftsmith.hooks: it cannot be imported, its hooks do not match the
    hookspecs, a hook raised or returned what the contract does not allow."""


def record_problem(record: Any, record_type: type) -> str | None:
    """Why ``record`` breaks the contract of ``record_type``, or None."""
    if not isinstance(record, record_type):
        return f"expected draftsmith.hooks.{record_type.__name__} records"
    return component_problem(record) if isinstance(record, Component) else spec_source_problem(record)


def component_problem(comp: Component) -> str | None:
    if not isinstance(comp.kind, str) or comp.kind not in KINDS:
        return (f"kind {comp.kind!r} is none the assembler asks for.{suggest(str(comp.kind), KINDS)} "
                f"kinds: {', '.join(KINDS)} (draftsmith.hooks.kinds)")
    if not isinstance(comp.name, str) or not comp.name.strip():
        return "the name must be a non-empty string (a spec names the component by it)"
    if not callable(comp.factory):
        return f"the factory must be callable: the assembler calls a {comp.kind}'s as {KINDS[comp.kind].call}"
    if not (isinstance(comp.params, type) and issubclass(comp.params, BaseModel)):
        return "params must be a pydantic model class (its fields are the keys a spec may give the component)"
    if comp.params.model_config.get("extra") != "forbid":
        return (f"params model {comp.params.__name__} must refuse unknown keys, or a misspelt key in a spec is "
                "silently ignored: set model_config = ConfigDict(extra='forbid') on it")
    return None


def spec_source_problem(src: SpecSource) -> str | None:
    if not isinstance(src.name, str) or not src.name.strip():
        return "the name must be a non-empty string (draftsmith.load_spec(name) finds the spec by it)"
    if not isinstance(src.path, Path):
        return ("path must be a pathlib.Path to the YAML file, e.g. Path(__file__).parent / 'my-spec.yaml' "
                "(a relative string would be read against the current directory)")
    return None
