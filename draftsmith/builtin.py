"""The built-in plugin: draftsmith's own components, specs and layout detectors, registered exactly like a
third-party plugin (under the name ``builtin``)."""
from __future__ import annotations

from draftsmith.hooks import hookimpl


@hookimpl
def draftsmith_components():
    from draftsmith.components.catalog import builtin_components

    return builtin_components()


@hookimpl
def draftsmith_specs():
    from draftsmith.specs.catalog import builtin_specs

    return builtin_specs()


@hookimpl
def draftsmith_detect_layout(config, tensor_names):
    from draftsmith.assembler.detect import detect_builtin_layout

    return detect_builtin_layout(config, tensor_names)
