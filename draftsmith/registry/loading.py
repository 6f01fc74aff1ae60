"""Loading plugins: the ``draftsmith`` entry points (each under its entry-point name, a clash of names refused) and
the registration of one plugin object, whose mistakes are said naming it (a hook name no hookspec has, arguments
a hookspec does not give, hook functions not marked ``@hookimpl``, a class where an instance was meant).
``DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD=1`` loads no installed plugin; ``DRAFTSMITH_DISABLE_PLUGINS=a,b`` skips those
by name, as pytest's ``-p no:NAME`` (one broken plugin need not take the others out)."""
from __future__ import annotations

import difflib
import functools
import importlib.metadata
import inspect
import logging
import os
import threading
from collections.abc import Iterable, Mapping

import pluggy

from draftsmith.errors import short_text, suggest
from draftsmith.hooks import PROJECT
from draftsmith.hooks.records import BUILTIN
from draftsmith.hooks import specs as hookspecs
from draftsmith.registry.checks import PLUGIN_FAULTS, PluginClash, PluginError, raised

BUILTIN_MODULE = "draftsmith.builtin"
NO_AUTOLOAD = "DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD"
DISABLED = "DRAFTSMITH_DISABLE_PLUGINS"


def autoload_disabled() -> bool:
    """Whether the environment sets ``DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD`` (to anything but empty or 0), as pytest
    reads PYTEST_DISABLE_PLUGIN_AUTOLOAD: the installed plugins (the ``draftsmith`` entry points) are not loaded."""
    return os.environ.get(NO_AUTOLOAD, "") not in ("", "0")


def blamed(error: PluginError, plugin: str) -> PluginError:
    """``error`` with the plugin it is about (``error.plugin``): `list` goes on without that plugin and says it."""
    error.plugin = plugin
    return error


_importing = threading.local()   # the entry point this thread is importing, as messages name it


def importing_plugin() -> str | None:
    """The plugin whose module this thread is importing now, as messages name it; None outside an import. A plugin
    that calls draftsmith's API at import time (``load_spec`` to derive its own spec) would build a registry
    holding itself half imported, hooks missing, which the process-wide registry then kept."""
    return getattr(_importing, "who", None)


def disabled_plugins() -> set[str]:
    """The plugin names ``DRAFTSMITH_DISABLE_PLUGINS`` lists (comma-separated): their entry points are skipped."""
    return {n.strip() for n in os.environ.get(DISABLED, "").split(",") if n.strip()}


def disabled_installed() -> tuple[str, ...]:
    """The installed plugins ``DRAFTSMITH_DISABLE_PLUGINS`` keeps out (none where it is not set); a name it lists
    that no installed plugin has (misspelt: it disables nothing) is warned of, once a process."""
    off = disabled_plugins()
    if not off:
        return ()
    installed = {ep.name for dist in importlib.metadata.distributions() for ep in dist.entry_points
                 if ep.group == PROJECT}
    if unknown := sorted(off - installed):
        which = "which is no installed plugin" if len(unknown) == 1 else "none of which is an installed plugin"
        _said_once(f"{DISABLED} names {', '.join(map(repr, unknown))}, {which} (installed: "
                   f"{', '.join(sorted(installed)) or 'none'})")
    return tuple(sorted(off & installed))


@functools.lru_cache(maxsize=None)
def _said_once(warning: str) -> None:
    """A warning of the environment, said once a process (a command builds more than one registry)."""
    logging.getLogger("draftsmith").warning("%s", warning)


def load_entry_points(pm: pluggy.PluginManager, skip: Iterable[str] = ()) -> dict[str, str]:
    """Register every plugin advertised in the ``draftsmith`` entry-point group, under its entry-point name, but
    those ``DRAFTSMITH_DISABLE_PLUGINS`` and ``skip`` name. A plugin that cannot be imported or registered is said
    naming its entry point and distribution, and how to go on without it; returned: that way out of each plugin
    registered, by name, for what its hooks answer later (:class:`draftsmith.registry.Registry`).

    Unlike pluggy's loader, a second distribution using a name already taken is a clash, not silently skipped
    (the same entry point seen twice on ``sys.path`` is one plugin)."""
    seen: dict[str, tuple[str, str]] = {}
    named: dict[str, str] = {}   # plugin name -> its entry point and distribution, as messages name it
    skipped = disabled_plugins() | set(skip)
    way_outs: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group != PROJECT or ep.name in skipped:
                continue
            origin = (dist.metadata["Name"] or "?", ep.value)
            if ep.name in seen and seen[ep.name][1] == ep.value:
                continue
            if ep.name in seen or pm.has_plugin(ep.name):
                first = f"distribution {seen[ep.name][0]!r}" if ep.name in seen else "draftsmith itself"
                fix = "uninstall one" if ep.name in seen else \
                    f"rename the entry point in {origin[0]!r} ({ep.name!r} is draftsmith's own)"
                clash = PluginClash(f"plugin name {ep.name!r} is used by both {first} and distribution "
                                    f"{origin[0]!r}; {fix} (draftsmith never shadows silently)")
                raise blamed(clash, ep.name) if ep.name in seen else clash   # `list` goes on without that name
            seen[ep.name] = origin
            where = named[ep.name] = \
                f"plugin {ep.name!r} (entry point {ep.name} = {ep.value} in distribution {origin[0]!r})"
            way_out = way_outs[ep.name] = \
                f"fix or uninstall {origin[0]!r}, or set {DISABLED}={ep.name} to load draftsmith without it"
            try:
                _importing.who = where   # a build_registry() inside the import is refused (importing_plugin)
                plugin = ep.load()
            except PluginError as e:   # said already, naming the plugin (a registry built by its import)
                raise blamed(type(e)(f"{e}; {way_out}"), ep.name) from e.__cause__
            except PLUGIN_FAULTS as e:
                raise blamed(PluginError(f"{where} cannot be imported: {raised(e, ep.module)}; {way_out}"),
                             ep.name) from e
            finally:
                _importing.who = None
            try:
                register_plugin(pm, plugin, ep.name, where, named)
            except PluginError as e:
                raise blamed(type(e)(f"{e}; {way_out}"), ep.name) from e.__cause__
    return way_outs


def hook_like(name: str, hooks: list[str]) -> bool:
    """Whether ``name`` is a hook's name or a typo of one (``draftsmith_componets``); a helper function such as
    ``draftsmith_cache_dir`` is neither."""
    prefix = "draftsmith_"
    return bool(difflib.get_close_matches(name.removeprefix(prefix), [h.removeprefix(prefix) for h in hooks], n=1,
                                          cutoff=0.8))


def register_plugin(pm: pluggy.PluginManager, plugin: object, name: str, where: str | None = None,
                    named: Mapping[str, str] | None = None, fix: str | None = None) -> None:
    """Register one plugin; a hook implementation pluggy refuses (a name no hookspec has, arguments a hookspec
    does not give: said with the hookspec's own arguments) is a PluginError naming the plugin, with the closest
    hook name; so are functions named as hooks that are not marked ``@hookimpl`` (pluggy ignores them: the plugin
    would contribute nothing, silently) and a class given where its instance was meant (its hooks would be called
    without ``self``). One object under two names (two entry points of one module) is refused naming both: a
    plugin has one name, its components' provider. ``named``: how messages name plugins registered already (by
    name), ``fix``: what to do when ``plugin`` is one of those (else: remove one of the two)."""
    where, named = where or f"plugin {name!r}", named or {}
    if (other := pm.get_name(plugin)) is not None:   # pluggy's ValueError would name neither
        # two entry points (named, no fix given), or what the caller says of an installed one (fix)
        fix = fix if fix and other in named else f"remove one of the two{' entry points' if named and not fix else ''}"
        raise PluginError(f"{where} is the same object as {named.get(other, f'plugin {other!r}')}, registered "
                          f"already; a plugin has one name, the provider its components are listed under: {fix}")
    if pm.has_plugin(name):
        raise PluginClash(f"plugin name {name!r} is taken{' by draftsmith itself' if name == BUILTIN else ''}; "
                          f"register {where} under another name (draftsmith never shadows silently)")
    hooks = sorted(h for h in dir(hookspecs) if h.startswith("draftsmith_"))
    own = [n for n in dir(plugin) if n.startswith("draftsmith_") and callable(getattr(plugin, n, None))]
    if unmarked := [n for n in own if pm.parse_hookimpl_opts(plugin, n) is None and hook_like(n, hooks)]:
        raise PluginError(f"{where}: {', '.join(unmarked)} {'is' if len(unmarked) == 1 else 'are'} not marked "
                          "@hookimpl (from draftsmith.hooks import hookimpl), so draftsmith would never call "
                          f"{'it' if len(unmarked) == 1 else 'them'}")
    if isinstance(plugin, type) and [n for n in own if pm.parse_hookimpl_opts(plugin, n) is not None
                                     and inspect.isfunction(inspect.getattr_static(plugin, n))]:   # needs a self
        raise PluginError(f"{where} is the class {plugin.__qualname__}, whose hooks would be called without an "
                          f"instance; register an instance (an entry point names a module or an object: "
                          f"plugin = {plugin.__qualname__}() in its module)")
    try:
        pm.register(plugin, name=name)
        pm.check_pending()  # a hookimpl whose name matches no hookspec (a typo) fails here instead of doing nothing
    except pluggy.PluginValidationError as e:
        text = " ".join(str(e).split())
        typo = next((n for n in own if n not in hooks and f"unknown hook {n!r}" in text), "")
        asked = [f"{n}({', '.join(inspect.signature(getattr(hookspecs, n)).parameters)})"
                 for n in own if n in hooks and n in text]
        said = f" It is called as {'; '.join(asked)}." if asked else ""
        raise PluginError(f"{where} does not fit draftsmith's hooks: {short_text(text, 500)}.{said}"
                          f"{suggest(typo, hooks) if typo else ''} The hooks: {', '.join(hooks)} "
                          "(draftsmith.hooks.specs)") from None
