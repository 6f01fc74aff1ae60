"""Plugin manager, component registry (kind, name) -> factory with provenance, and the spec catalog."""
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
