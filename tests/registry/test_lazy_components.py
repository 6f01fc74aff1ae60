"""The process-wide registry collects the components on first use (the built-in ones import torch): a spec's name is
found without them, and a plugin's component mistake is said by the first call that asks for a component, each
time, never swallowed. A registry built for code (build_registry()) still says the mistake where it is built."""
from __future__ import annotations

import pytest

import draftsmith
from draftsmith.components.norms import rms
from draftsmith.hooks import Component
from draftsmith.registry import PluginClash, PluginError

from test_plugins import Plugin


def broken() -> tuple[str, Plugin]:
    return "nrom-plugin", Plugin([Component("nrom", "offset_rms", rms)])


def test_a_lazy_registry_knows_its_specs_before_its_components_and_says_a_plugin_mistake_on_first_use():
    reg = draftsmith.build_registry(plugins=[broken()], entry_points=False, lazy=True)
    assert reg.has_spec("eagle3-llama") and reg.spec_source("demo").name == "demo"
    for _ in range(2):   # raised again: nothing half-collected is kept
        with pytest.raises(PluginError, match=r"^draftsmith_components of plugin 'nrom-plugin' returned .*kind "
                                              r"'nrom' is none the assembler asks for"):
            reg.get("norm", "rms")


def test_a_registry_built_for_code_says_the_plugin_mistake_where_it_is_built():
    with pytest.raises(PluginError, match=r"kind 'nrom' is none the assembler asks for"):
        draftsmith.build_registry(plugins=[broken()], entry_points=False)


def test_a_component_clash_is_said_before_a_spec_clash_either_way():
    """Components are collected first where the registry is built eagerly, as before the lazy one; a lazy one says
    the component clash on first use."""
    comp = Component("norm", "rms", rms)
    with pytest.raises(PluginClash, match=r"^norm 'rms' is provided by both plugin 'builtin' and plugin 'twin'"):
        draftsmith.build_registry(plugins=[("twin", Plugin([comp]))], entry_points=False)
    reg = draftsmith.build_registry(plugins=[("twin", Plugin([comp]))], entry_points=False, lazy=True)
    with pytest.raises(PluginClash, match=r"^norm 'rms' is provided by both plugin 'builtin' and plugin 'twin'"):
        reg.names("norm")


def test_the_default_registry_is_lazy():
    draftsmith.default_registry.cache_clear()
    try:
        assert "components" not in vars(draftsmith.default_registry())
        assert ("norm", "rms") in draftsmith.default_registry().components
    finally:
        draftsmith.default_registry.cache_clear()
