"""The plugin contract: markers and the documented hookspecs (see :mod:`draftsmith.hooks.specs`)."""
from draftsmith.hooks.markers import PROJECT, hookimpl, hookspec
from draftsmith.hooks.records import Component, LayoutMatch, SpecSource

__all__ = ["PROJECT", "Component", "LayoutMatch", "SpecSource", "hookimpl", "hookspec"]
