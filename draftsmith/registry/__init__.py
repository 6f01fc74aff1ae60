"""Plugin manager, component registry (kind, name) -> factory with provenance, and the spec catalog."""
from draftsmith.registry.registry import (
    PluginClash,
    Registry,
    UnknownComponent,
    build_registry,
    default_registry,
)

__all__ = ["PluginClash", "Registry", "UnknownComponent", "build_registry", "default_registry"]
