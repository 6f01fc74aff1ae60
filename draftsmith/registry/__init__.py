"""Plugin manager, component registry (kind, name) -> factory with provenance, and the spec catalog (the plugins'
specs and those of the DRAFTSMITH_SPEC_PATH folders, :mod:`draftsmith.registry.spec_path`)."""
from draftsmith.registry.checks import PluginError
from draftsmith.registry.registry import (
    ComponentFailed,
    PluginClash,
    Registry,
    UnknownComponent,
    build_registry,
    default_registry,
)

__all__ = ["ComponentFailed", "PluginClash", "PluginError", "Registry", "UnknownComponent", "build_registry",
           "default_registry"]
