"""The registry: one plugin manager, the components and specs every plugin returned, and who returned each."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.metadata
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pluggy

from draftsmith.errors import DraftsmithError, short, short_text, suggest
from draftsmith.hooks import PROJECT, Component, LayoutMatch, SpecSource
from draftsmith.hooks import specs as hookspecs
from draftsmith.hooks.kinds import KINDS
from draftsmith.registry.checks import PLUGIN_FAULTS, PluginClash, PluginError, collected, raised
from draftsmith.registry.loading import (BUILTIN, BUILTIN_MODULE, DISABLED, NO_AUTOLOAD, autoload_disabled, blamed,
                                        disabled_installed, importing_plugin, load_entry_points, register_plugin)
from draftsmith.registry.results import ComponentFailed, checked
from draftsmith.registry.spec_path import SPEC_PATH, read_name, scan_folder, spec_folders



class UnknownComponent(DraftsmithError, LookupError):
    def __init__(self, kind: str, name: str, known: Sequence[tuple[str, str]], note: str = "", hint: str | None = None):
        self.kind, self.name, self.known = kind, name, known
        hint = suggest(name, [n for n, _ in known]) if hint is None else hint   # given: what stands for a did-you-mean
        listing = ", ".join(f"{n} ({p})" for n, p in known) or "none registered"
        note = f". {note}" if note else ""   # Registry.not_loaded_note: plugins kept out by the environment
        super().__init__(f"unknown {kind} {short(name)}.{hint} known: {listing}{note}")


class UnknownSpec(DraftsmithError, LookupError):
    """No spec of that name is registered and no such file exists."""


@dataclass(frozen=True)
class Provided:
    record: Any
    plugin: str           # the plugin's name; for a spec of a DRAFTSMITH_SPEC_PATH folder, the folder
    folder: bool = False  # a spec file of a DRAFTSMITH_SPEC_PATH folder, not a plugin's

    def who(self) -> str:
        return f"folder {self.plugin!r} of {SPEC_PATH}" if self.folder else f"plugin {self.plugin!r}"


class Registry:
    """Components and specs flattened from every plugin, each with the plugin that provided it; then the specs of
    the ``spec_folders`` (:mod:`draftsmith.registry.spec_path`), each with its folder."""

    def __init__(self, pm: pluggy.PluginManager, spec_folders: Iterable[os.PathLike] = (), *,
                 autoload_off: bool = False, way_outs: Mapping[str, str] | None = None, lazy: bool = False,
                 disabled: Sequence[str] = ()):
        self.pm = pm
        # an installed plugin's way out (load_entry_points'): its collecting hook's failure says it, and `list`
        # goes on without the plugin
        self.way_outs = dict(way_outs or {})
        # DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD kept the installed plugins out: a name not found says one may provide it
        self.autoload_off = autoload_off
        self.disabled = tuple(disabled)   # the installed plugins DRAFTSMITH_DISABLE_PLUGINS kept out: said likewise
        self.specs: dict[str, Provided] = {}
        # the *.yaml / *.yml files of the spec folders whose name: could not be read, each with why: not an error
        # (one bad file must not stop every command), but `draftsmith list` and a spec not found name them
        self.skipped_spec_files: list[tuple[Path, str]] = []
        # a name that files of the spec folders give to more than one spec (with a plugin's, or one another's), with
        # every provider in order: not in ``specs`` (nothing is shadowed), refused only where it is asked for
        # (spec_source, so load_spec and --spec; `draftsmith list` shows it broken), so every other spec still works
        self.spec_clashes: dict[str, list[Provided]] = {}
        if not lazy:   # collected now, first: a plugin's component mistake is said where the plugin is registered
            self.components   # noqa: B018
        for impl in pm.hook.draftsmith_specs.get_hookimpls():
            for src in self._collected(impl, SpecSource):
                with self._way_out(impl.plugin_name):   # a name taken: the plugin that took it can be left out
                    self._add(self.specs, src.name, src, impl.plugin_name)
        for folder in spec_folders:
            found, skipped = scan_folder(Path(folder))
            for src in found:
                self._add_file(src, str(folder))
            self.skipped_spec_files.extend(skipped)

    @functools.cached_property
    def components(self) -> dict[tuple[str, str], Provided]:
        """Every plugin's components by (kind, name), collected on first use: the built-in ones import torch
        (seconds), which a spec's name, a plugin's spec or a detector does not need. A plugin's failure or clash is
        raised here, by the first call that asks for a component, and again by each later one (nothing is kept)."""
        found: dict[tuple[str, str], Provided] = {}
        for impl in self.pm.hook.draftsmith_components.get_hookimpls():
            for comp in self._collected(impl, Component):
                with self._way_out(impl.plugin_name):
                    self._add(found, (comp.kind, comp.name), comp, impl.plugin_name)
        return found

    def _collected(self, impl: pluggy.HookImpl, record_type: type) -> list:
        """:func:`~draftsmith.registry.checks.collected`; an installed plugin's failure says its way out and names the
        plugin, so that `list` lists the others (its collecting hook raised, or returned what the contract refuses)."""
        with self._way_out(impl.plugin_name):
            return collected(impl, record_type)

    @contextlib.contextmanager
    def _way_out(self, plugin: str):
        """An installed plugin's PluginError raised inside says its way out (uninstall it, or skip it by name) and
        names the plugin (`list` lists the others); draftsmith's own, or a plugin registered in code, as it is."""
        try:
            yield
        except PluginError as e:
            if (way_out := self.way_outs.get(plugin)) is None or way_out in str(e):
                raise
            raise blamed(type(e)(f"{e}; {way_out}"), plugin) from e.__cause__

    def _add_file(self, src: SpecSource, folder: str) -> None:
        """A folder's spec. A name taken already (by a plugin, another folder, another file of this one) moves to
        ``spec_clashes``: never a silent shadow, and never an error for a command that does not ask for that name.
        One file reached twice (a symlink to a file already read, by its resolved path) is registered once, under
        the path read first."""
        taken = self.spec_clashes.get(src.name) or ([self.specs[src.name]] if src.name in self.specs else [])
        if any(p.folder and os.path.realpath(p.record.path) == os.path.realpath(src.path) for p in taken):
            return   # one file reached twice (a symlink to it): one spec, as a folder named twice is one folder
        new = Provided(src, folder, folder=True)
        if taken:
            self.spec_clashes[src.name] = [*taken, new]
            self.specs.pop(src.name, None)
        else:
            self.specs[src.name] = new

    @staticmethod
    def _add(table: dict, key: Any, record: Any, plugin: str) -> None:
        if key in table:
            other = table[key].plugin
            who = f"twice by plugin {plugin!r}" if other == plugin else \
                f"by both plugin {other!r} and plugin {plugin!r}"
            fix = "rename its component" if isinstance(key, tuple) else "rename one spec"
            fix = f"plugin {plugin!r} must rename its {'component' if isinstance(key, tuple) else 'spec'}: " \
                "draftsmith's own names are kept" if other == BUILTIN else \
                f"uninstall one or {fix}"
            raise blamed(PluginClash(f"{_describe(key)} is provided {who}; {fix} (draftsmith never shadows "
                                     "silently)"), plugin)
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
            raise UnknownComponent(kind, name, self.names(kind), self.not_loaded_note()) from None

    def provider(self, kind: str, name: str) -> str:
        return self.components[(kind, name)].plugin

    def not_loaded_note(self) -> str:
        """What a component or spec name that none provides is told where the installed plugins were not loaded
        (one of them may provide it); '' where they were."""
        if self.autoload_off:
            return (f"Plugin autoloading is disabled by {NO_AUTOLOAD}, so an installed plugin that provides it was "
                    f"not loaded; unset {NO_AUTOLOAD} to load the installed plugins.")
        if not self.disabled:
            return ""
        names, them = ", ".join(map(repr, self.disabled)), "it" if len(self.disabled) == 1 else "them"
        return (f"{DISABLED} keeps the installed plugin{'s' * (len(self.disabled) > 1)} {names} out, which may "
                f"provide it; remove {them} from {DISABLED} to load {them}.")

    def build(self, kind: str, name: str, *args: Any, **context: Any) -> Any:
        """``factory(*args, **context)`` of component ``(kind, name)``, checked: anything but a draftsmith error
        that it raises, and a result its kind cannot use, is a :class:`ComponentFailed` naming the component, its
        plugin and the call the assembler makes (draftsmith's own errors, such as a fusion's SpecError, pass); so
        is an exception from a method of a plugin's result that the assembler calls later (results.Guarded)."""
        comp, contract, plugin = self.get(kind, name), KINDS.get(kind), self.provider(kind, name)
        who = f"{kind} {short(name)} (plugin {plugin!r})"
        call = f"; the assembler calls it as {contract.call} and needs {contract.returns}" if contract else ""
        try:
            made = comp.factory(*args, **context)
        except DraftsmithError:
            raise
        except PLUGIN_FAULTS as e:
            if plugin == BUILTIN:   # draftsmith's own bug: an internal error, with its traceback
                raise
            raise ComponentFailed(f"{who} failed to build: {raised(e, comp.factory)}{call}") from e
        return made if contract is None else checked(made, contract, who, call, guard=plugin != BUILTIN,
                                                     context=context)

    def holds(self, kind: str, name: str, params: Mapping[str, Any], fallback: Sequence[str]) -> tuple[str, ...]:
        """The regexes of the canonical names component ``(kind, name)``, given a spec's ``params``, may hold
        (:attr:`Component.holds`); ``fallback`` where it does not say. A plugin's answer that raises, is not a
        sequence of strings or holds a bad regex is a :class:`ComponentFailed` naming it."""
        comp = self.get(kind, name)
        if comp.holds is None:
            return tuple(fallback)

        def answer() -> tuple[str, ...]:
            found = comp.holds(dict(params))
            if not (isinstance(found, (tuple, list)) and all(isinstance(p, str) for p in found)):
                raise TypeError(f"returned {short(found)}, not a tuple of regex strings")
            for pattern in found:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise ValueError(f"{short(pattern)} is no regex: {e}") from None
            return tuple(found)
        return self._answered(kind, name, "holds(params)", answer, comp.holds)

    def reads(self, kind: str, name: str, params: Any, draft_config: Mapping[str, Any]) -> dict[str, Any] | None:
        """The values component ``(kind, name)``'s params (validated: its params model) that a spec may leave to the
        checkpoint take for ``draft_config`` (:attr:`Component.reads`); None where it does not say or the config
        cannot be read that way (the load says why). A plugin's answer that raises for another reason or is not a
        mapping of field names is a :class:`ComponentFailed` naming it."""
        comp = self.get(kind, name)
        if comp.reads is None:
            return None

        def answer() -> dict[str, Any] | None:
            try:
                found = comp.reads(params, dict(draft_config))
            except DraftsmithError:   # the config cannot be read that way: the load says why
                return None
            if not (isinstance(found, Mapping) and all(isinstance(k, str) for k in found)):
                raise TypeError(f"returned {short(found)}, not a mapping of field names to values")
            return dict(found)
        return self._answered(kind, name, "reads(params, draft_config)", answer, comp.reads)

    def _answered(self, kind: str, name: str, call: str, answer: Callable[[], Any], code: Any) -> Any:
        """``answer()``: what component ``(kind, name)``'s ``call`` answers, checked; a plugin's that raises is a
        :class:`ComponentFailed` naming it (draftsmith's own bug raises as it is)."""
        plugin = self.provider(kind, name)
        try:
            return answer()
        except PLUGIN_FAULTS as e:
            if plugin == BUILTIN:
                raise
            raise ComponentFailed(f"{kind} {short(name)} (plugin {plugin!r}): {call} failed: "
                                  f"{raised(e, code)}") from e

    def spec_source(self, name: str) -> SpecSource:
        """The spec registered as ``name``; a :class:`PluginClash` naming every file where spec folders give that name
        to more than one spec; an :class:`UnknownSpec` where none has it."""
        if name in self.spec_clashes:
            raise _spec_clash(name, self.spec_clashes[name])
        try:
            return self.specs[name].record
        except KeyError:
            known = [n for n, _ in self.spec_names()]
            notes = "".join(f"\nnote: {short_text(path, 300)} in {SPEC_PATH} was skipped: {why}"
                            for path, why in self.skipped_spec_files if path.stem == name)
            notes += "".join(f"\nnote: {short_text(p.record.path, 300)} says name: {short(name)}, but {p.who()} "
                             f"registers it as {short(n)} (its draftsmith_specs hook's SpecSource name): the plugin "
                             "must give both one name"
                             for n, p in self.specs.items() if not p.folder and p.plugin != BUILTIN
                             and read_name(Path(p.record.path))[0] == name)   # a plugin's SpecSource misnamed
            note = f"\nnote: {note}" if (note := self.not_loaded_note()) else ""
            raise UnknownSpec(
                f"no spec named {short(name)} and no such file.{suggest(name, known)} known: {', '.join(known)}"
                f"{notes}{note}"
            ) from None

    def spec_provider(self, name: str) -> str:
        """Who provides the registered spec ``name``, as messages say it: ``plugin 'acme'``, or ``folder '...' of
        DRAFTSMITH_SPEC_PATH``."""
        return self.specs[name].who()

    def spec_names(self) -> list[tuple[str, str]]:
        """[(name, provider)] sorted by name, a clashing name's providers joined by ', ' (it is listed, not hidden:
        looking it up says the clash)."""
        clashes = ((n, ", ".join(dict.fromkeys(p.plugin for p in ps))) for n, ps in self.spec_clashes.items())
        return sorted([*((n, p.plugin) for n, p in self.specs.items()), *clashes])

    def has_spec(self, name: str) -> bool:
        """Whether ``name`` is a registered spec's name, a clashing one included (:meth:`spec_source` refuses it)."""
        return name in self.specs or name in self.spec_clashes

    def detect_layout(self, config: Mapping[str, Any], tensor_names: Sequence[str]) -> LayoutMatch | None:
        """The first detector's answer (pluggy's order: the plugin registered last asks first), with the plugin
        that gave it in ``LayoutMatch.plugin``. A detector that raises, answers something else than a LayoutMatch
        or None, or names a spec no plugin provides is a :class:`PluginError` naming that plugin."""
        names, hook = list(tensor_names), self.pm.hook.draftsmith_detect_layout
        impls = hook.get_hookimpls()
        if any(i.hookwrapper or getattr(i, "wrapper", False) for i in impls):   # pluggy runs the wrappers
            who = "draftsmith_detect_layout (through a plugin's hook wrapper)"
            return self._checked(self._asked(who, hook, config=config, tensor_names=names), who, "")
        for impl in reversed(impls):
            who = f"draftsmith_detect_layout of plugin {impl.plugin_name!r}"
            kwargs = {k: v for k, v in (("config", config), ("tensor_names", names)) if k in impl.argnames}
            with self._way_out(impl.plugin_name):
                match = self._checked(self._asked(who, impl.function, **kwargs), who, impl.plugin_name)
            if match:
                return match
        return None

    @staticmethod
    def _asked(who: str, call: Any, **kwargs: Any) -> Any:
        try:
            return call(**kwargs)
        except DraftsmithError:
            raise
        except PLUGIN_FAULTS as e:
            raise PluginError(f"{who} raised {raised(e, call)}") from e

    def _checked(self, match: Any, who: str, plugin: str) -> LayoutMatch | None:
        """A detector's answer checked: a LayoutMatch naming a registered spec (with its plugin), or None."""
        if match is None:
            return None
        if not isinstance(match, LayoutMatch):
            raise PluginError(f"{who} returned {short(match)}; a detector returns a draftsmith.hooks.LayoutMatch "
                              "or None")
        said = match.assumptions
        fields = {"spec": (match.spec, isinstance(match.spec, str), "a spec's name (a str)"),
                  "reason": (match.reason, isinstance(match.reason, str) and bool(match.reason.strip()),
                             "a non-empty str: why the layout is that spec's, as inspect and generate say it"),
                  "assumptions": (said, isinstance(said, (tuple, list)) and all(isinstance(a, str) for a in said),
                                  "a tuple of str, one per assumption (a bare str would be said a letter a line)")}
        if wrong := [f"{name} {short(value)} (wanted {want})" for name, (value, fine, want) in fields.items()
                     if not fine]:
            raise PluginError(f"{who} returned a LayoutMatch whose {'; '.join(wrong)}")
        match = dataclasses.replace(match, assumptions=tuple(said))
        if not self.has_spec(match.spec):   # a clashing name is provided: loading it says the clash
            known = [n for n, _ in self.spec_names()]
            raise PluginError(f"{who} answered spec {short(match.spec)}, which no plugin provides."
                              f"{suggest(match.spec, known)} known: {', '.join(known)}")
        return dataclasses.replace(match, plugin=plugin) if plugin else match


def _spec_clash(name: str, providers: Sequence[Provided]) -> PluginClash:
    """The error of a spec name that several files have (a plugin's first, if any; then the folders', in path
    order): who provides it, every file, and which to rename."""
    whos = list(dict.fromkeys(p.who() for p in providers))
    times = "twice" if len(providers) == 2 else f"{len(providers)} times"
    who = f"{times} by {whos[0]}" if len(whos) == 1 else f"by {'both ' * (len(whos) == 2)}{_and(whos)}"
    files = [short_text(p.record.path, 300) for p in providers]
    fix = f"in {_and(files[1:])}" if not providers[0].folder else \
        f"in {'one' if len(files) == 2 else 'all but one'} of them"
    return PluginClash(f"spec {name!r} is provided {who}, in {_and(files)}; change the name: {fix} (draftsmith never "
                       f"shadows silently; meanwhile `{SPEC_PATH}= draftsmith ...` runs a command without these "
                       "folders)")


def _and(texts: Sequence[str], most: int = 5) -> str:
    """'a', 'a and b', 'a, b and c'; past ``most`` texts, 'a, b, c, d, e and 3 more'."""
    if len(texts) > most:
        return f"{', '.join(texts[:most])} and {len(texts) - most} more"
    return " and ".join(t for t in (", ".join(texts[:-1]), texts[-1]) if t)


def _describe(key: Any) -> str:
    return f"{key[0]} {key[1]!r}" if isinstance(key, tuple) else f"spec {key!r}"


def build_registry(plugins: Iterable[tuple[str, object]] = (), *, entry_points: bool | None = None,
                   spec_path: str | None = None, skip: Iterable[str] = (), lazy: bool = False) -> Registry:
    """A fresh plugin manager: the built-ins, the ``draftsmith`` entry points, then ``plugins`` (name, obj); and
    the spec files of the folders ``spec_path`` lists (``os.pathsep``-separated; None: ``DRAFTSMITH_SPEC_PATH``).

    ``entry_points`` None: loaded unless the environment sets ``DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD`` (to anything
    but empty or 0), as pytest's PYTEST_DISABLE_PLUGIN_AUTOLOAD: a way around an installed plugin that is broken.
    ``skip``: installed plugins left out by name, beside those ``DRAFTSMITH_DISABLE_PLUGINS`` names.
    ``lazy``: the components are collected on first use (:attr:`Registry.components`), so a plugin's component
    mistake is raised then, not here.

    The built-in plugin (:mod:`draftsmith.builtin`) is imported by name, as pytest imports its default plugins:
    it lists components, specs and detectors from the layers above the registry, which import the registry."""
    if (who := importing_plugin()) is not None:
        raise PluginError(f"{who} uses draftsmith's registry while it is being imported (load_spec, list_specs, "
                          "assemble or build_registry at module level), before its own hooks are registered; call "
                          "draftsmith inside its hooks instead (draftsmith_specs may read a built-in spec's file)")
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(importlib.import_module(BUILTIN_MODULE), name=BUILTIN)
    autoload_off = entry_points is None and autoload_disabled()
    loading = entry_points if entry_points is not None else not autoload_off
    disabled = disabled_installed() if loading else ()   # before the plugins load (one may fail)
    way_outs = load_entry_points(pm, skip) if loading else {}
    installed = {n: f"the installed plugin {n!r} (loaded from its entry point)" for n in way_outs}
    for name, plugin in plugins:
        register_plugin(pm, plugin, name, None, installed,
                        fix="leave it out of plugins= (it is installed), or pass entry_points=False to give it here")
    return Registry(pm, spec_folders(spec_path), autoload_off=autoload_off, way_outs=way_outs, lazy=lazy,
                    disabled=disabled)


@functools.lru_cache(maxsize=1)
def default_registry() -> Registry:
    """The process-wide registry (built-ins + installed plugins + DRAFTSMITH_SPEC_PATH), built on first use; its
    components are collected when first asked for, so that a spec's name is found (or said unknown) without the
    built-in components' torch import."""
    return build_registry(lazy=True)
