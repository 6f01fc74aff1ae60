"""draftsmith: speculative-decoding draft models from YAML specs.

>>> import draftsmith
>>> model = draftsmith.assemble("demo")
>>> out = model.generate("def fibonacci(n):", max_new_tokens=32)

The names below are imported when first used (PEP 562), so that ``import draftsmith`` and ``draftsmith --help``
load no torch (every other command imports it with the component registry), and a Ctrl-C in the command's first
second ends it as one at any later moment does.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_HOMES = {"assemble": "draftsmith.assembler.assemble", "build_registry": "draftsmith.registry",
          "default_registry": "draftsmith.registry", "Problem": "draftsmith.errors", "SpecError": "draftsmith.errors",
          "DraftsmithError": "draftsmith.errors", "ArgumentError": "draftsmith.errors",
          "OptionError": "draftsmith.errors",
          "list_specs": "draftsmith.specs.loader", "load_spec": "draftsmith.specs.loader",
          "parse_spec": "draftsmith.specs.loader", "Spec": "draftsmith.specs.schema"}

# _HOMES' names (a test holds them equal)
__all__ = ["ArgumentError", "DraftsmithError", "OptionError", "Problem", "Spec", "SpecError", "assemble",
           "build_registry", "default_registry", "list_specs", "load_spec", "parse_spec"]
__version__ = "0.1.0"

if TYPE_CHECKING:  # what a type checker and an IDE read
    from draftsmith.assembler.assemble import assemble
    from draftsmith.errors import ArgumentError, DraftsmithError, OptionError, Problem, SpecError
    from draftsmith.registry import build_registry, default_registry
    from draftsmith.specs.loader import list_specs, load_spec, parse_spec
    from draftsmith.specs.schema import Spec


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'draftsmith' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value   # once: later reads do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
