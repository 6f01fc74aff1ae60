"""The registry: one plugin manager, the components and specs every plugin returned, and who returned each."""
from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from draftsmith.errors import DraftsmithError, short
from draftsmith.hooks import PROJECT, Component, LayoutMatch, SpecSource
from draftsmith.hooks import specs as hookspecs

BUILTIN, BUILTIN_MODULE = "builtin", "draftsmith.builtin"


class PluginClash(DraftsmithError, RuntimeError):
    """Two plugins provide the same (kind, name) or the same spec name."""


class UnknownComponent(DraftsmithError, LookupError):
    def __init__(self, kind: str, name: str, known: Sequence[tuple[str, str]]):
        self.kind, self.name, self.known = kind, name, known
        hint = suggest(name, [n for n, _ in known])
        listing = ", ".join(f"{n} ({p})" for n, p in known) or "none registered"
        super().__init__(f"unknown {kind} {short(name)}.{hint} known: {listing}")


class UnknownSpec(DraftsmithError, LookupError):
    """No spec of that name is registered and no such file exists."""


SUGGEST_CHARS = 100   # longer words get no suggestion: difflib's cost grows with the word (2 MB took 0.75 s)


def suggest(word: str, choices: Iterable[str]) -> str:
    """' Did you mean 'x'?' for the closest choice, or ''."""
    text = word if isinstance(word, str) else short(word)   # str() of a found value could be megabytes too
    if len(text) > SUGGEST_CHARS:
        return ""
    close = difflib.get_close_matches(text, list(choices), n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


@dataclass(frozen=True)
class Provided:
    record: Any
    plugin: str


class Registry:
    """Components and specs flattened from every plugin, each with the plugin that provided it."""

    def __init__(self, pm: pluggy.PluginManager):
        self.pm = pm
        self.components: dict[tuple[str, str], Provided] = {}
        self.specs: dict[str, Provided] = {}
        for impl in pm.hook.draftsmith_components.get_hookimpls():
            for comp in _records(impl, Component):
                self._add(self.components, (comp.kind, comp.name), comp, impl.plugin_name)
        for impl in pm.hook.draftsmith_specs.get_hookimpls():
            for src in _records(impl, SpecSource):
                self._add(self.specs, src.name, src, impl.plugin_name)

    @staticmethod
    def _add(table: dict, key: Any, record: Any, plugin: str) -> None:
        if key in table:
            other = table[key].plugin
            who = f"twice by plugin {plugin!r}" if other == plugin else \
                f"by both plugin {other!r} and plugin {plugin!r}"
            raise PluginClash(f"{_describe(key)} is provided {who}; uninstall one or rename its component "
                              "(draftsmith never shadows silently)")
        table[key] = Provided(record, plugin)

    def names(self, kind: str) -> list[tuple[str, str]]:
        """[(name, provider)] of one kind, sorted by name."""
        return sorted((n, p.plugin) for (k, n), p in self.components.items() if k == kind)

    def kinds(self) -> list[str]:
        return sorted({k for k, _ in self.components})

    def get(self, kind: str, name: str) -> Component:
        try:
            return self.components[(kind, name)].record
        except KeyError:
            raise UnknownComponent(kind, name, self.names(kind)) from None

    def provider(self, kind: str, name: str) -> str:
        return self.components[(kind, name)].plugin

    def spec_source(self, name: str) -> SpecSource:
        try:
            return self.specs[name].record
        except KeyError:
            known = sorted(self.specs)
            raise UnknownSpec(
                f"no spec named {short(name)} and no such file.{suggest(name, known)} known: {', '.join(known)}"
            ) from None

    def spec_names(self) -> list[tuple[str, str]]:
        return sorted((n, p.plugin) for n, p in self.specs.items())

    def detect_layout(self, config: Mapping[str, Any], tensor_names: Sequence[str]) -> LayoutMatch | None:
        return self.pm.hook.draftsmith_detect_layout(config=config, tensor_names=list(tensor_names))


def _describe(key: Any) -> str:
    return f"{key[0]} {key[1]!r}" if isinstance(key, tuple) else f"spec {key!r}"


def _records(impl: pluggy.HookImpl, record_type: type) -> list:
    """What one plugin's collecting hook returned, checked to be records of the documented type."""
    records = list(impl.function() or ())
    for r in records:
        if not isinstance(r, record_type):
            raise TypeError(f"plugin {impl.plugin_name!r} returned {r!r} from {impl.function.__name__}; "
                            f"expected draftsmith.hooks.{record_type.__name__} records")
    return records


def load_entry_points(pm: pluggy.PluginManager) -> None:
    """Register every plugin advertised in the ``draftsmith`` entry-point group, under its entry-point name.

    Unlike pluggy's loader, a second distribution using a name already taken is a clash, not silently skipped
    (the same entry point seen twice on ``sys.path`` is one plugin)."""
    seen: dict[str, tuple[str, str]] = {}
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group != PROJECT:
                continue
            origin = (dist.metadata["Name"] or "?", ep.value)
            if ep.name in seen and seen[ep.name][1] == ep.value:
                continue
            if ep.name in seen or pm.has_plugin(ep.name):
                first = f"distribution {seen[ep.name][0]!r}" if ep.name in seen else "draftsmith itself"
                raise PluginClash(f"plugin name {ep.name!r} is used by both {first} and distribution "
                                  f"{origin[0]!r}; uninstall one (draftsmith never shadows silently)")
            seen[ep.name] = origin
            pm.register(ep.load(), name=ep.name)


def build_registry(plugins: Iterable[tuple[str, object]] = (), *, entry_points: bool = True) -> Registry:
    """A fresh plugin manager: the built-ins, the ``draftsmith`` entry points, then ``plugins`` (name, obj).

    The built-in plugin (:mod:`draftsmith.builtin`) is imported by name, as pytest imports its default plugins:
    it lists components, specs and detectors from the layers above the registry, which import the registry."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(importlib.import_module(BUILTIN_MODULE), name=BUILTIN)
    if entry_points:
        load_entry_points(pm)
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    pm.check_pending()  # a hookimpl whose name matches no hookspec (a typo) fails here instead of doing nothing
    return Registry(pm)


@functools.lru_cache(maxsize=1)
def default_registry() -> Registry:
    """The process-wide registry (built-ins + installed plugins), built on first use."""
    return build_registry()
