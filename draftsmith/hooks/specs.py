"""Hook specifications: the only contract between draftsmith and its plugins.

A plugin is any object or module with functions marked ``@draftsmith.hooks.hookimpl`` whose names are below.
Built-in components register through exactly these hooks; a third-party package advertises its plugin module
in the entry-point group ``draftsmith``::

    [project.entry-points.draftsmith]
    sliding = "draftsmith_sliding.plugin"

The entry-point name (``sliding``) is the plugin's name: ``draftsmith list`` and every spec error show it as the
provider of the plugin's components. ``builtin`` is draftsmith's own; two distributions claiming one name fail at
start-up naming both, and so does one plugin object under two names (two entry points of one module).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from draftsmith.hooks.markers import hookspec
from draftsmith.hooks.records import Component, LayoutMatch, SpecSource


@hookspec
def draftsmith_components() -> Iterable[Component]:
    """Return the components this plugin provides.

    Called once per plugin when the registry is built. ``(kind, name)`` must be unique across all plugins; a
    clash fails at start-up naming both plugins, nothing is silently renamed or shadowed. Return records with
    factories and their ``Params`` models; build nothing here (the default registry is built once per process,
    on first use, and every ``build_registry`` call builds another).

    Kinds the assembler asks for, each with the call its factory gets and what it must return:
    :data:`draftsmith.hooks.kinds.KINDS` (``layer``, ``attention``, ``mlp``, ``norm``, ``fusion``,
    ``weight_rule``, ``quant``, ``attn_backend``, ``target``). Refused when the plugin registers: a record of
    another kind; a name a spec keeps for itself (attention ``auto``); a ``doc`` that is not a string (``""`` for
    none); a ``params`` model that accepts unknown keys, or has a field named as the key that selects the
    component (``kind``; quant's ``method``), which a spec could never give. A spec names a component by
    ``kind`` and ``name`` only; YAML never holds an import path. The registry calls each plugin's hook on its
    own (to know who provides each record), so a hook wrapper of it is refused; it may be a generator.
    """


@hookspec
def draftsmith_specs() -> Iterable[SpecSource]:
    """Return the named YAML specs this plugin ships.

    Each becomes loadable as ``draftsmith.load_spec(name)`` and is listed by ``draftsmith list``. Names are
    unique across plugins (a clash fails at start-up naming both; a DRAFTSMITH_SPEC_PATH file taking a plugin's
    name makes only that name fail, when it is used), and the file's own ``name:`` must equal the
    name given here. As for ``draftsmith_components``, a hook wrapper of this hook is refused.
    """


@hookspec(firstresult=True)
def draftsmith_detect_layout(
    config: Mapping[str, Any], tensor_names: Sequence[str]
) -> LayoutMatch | None:
    """Say which registered spec (by name) loads this checkpoint, or None when this plugin does not recognise it.

    ``config`` is the checkpoint's ``config.json`` as read (never trusted for ``architectures`` alone);
    ``tensor_names`` are the names stored in its weight files, read without loading any data. The first
    non-None answer wins, so answer only when the tensor names prove the layout, and list in
    ``LayoutMatch.assumptions`` every fact the weights cannot show (norm placement, tap convention).
    """
