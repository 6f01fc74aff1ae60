"""Plugins installed as distributions: the ``draftsmith`` entry-point group, with a fake distribution on sys.path."""
import sys
import textwrap

import pytest

import draftsmith
from draftsmith.registry import PluginClash

PLUGIN = textwrap.dedent('''
    from pathlib import Path

    from draftsmith.hooks import Component, SpecSource, hookimpl


    @hookimpl
    def draftsmith_components():
        return [Component("norm", "{norm}", lambda params, *, dim, eps: None, doc="a plugin norm")]


    @hookimpl
    def draftsmith_specs():
        return [SpecSource("{norm}-draft", Path(__file__).with_name("{norm}-draft.yaml"))]
''')


def fake_distribution(root, request, *, dist="ds-fake-plugin", ep_name="fake", norm="layernorm-x"):
    """A folder holding one installed-looking distribution: its module, a spec and a *.dist-info."""
    module = f"ds_plugin_{norm.replace('-', '_')}_{abs(hash(str(root)))}"
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(PLUGIN.format(norm=norm))
    (root / f"{norm}-draft.yaml").write_text(textwrap.dedent(f'''
        name: {norm}-draft
        draft:
          norm: {{kind: {norm}}}
          fusion: {{kind: eagle1}}
    '''))
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[draftsmith]\n{ep_name} = {module}\n")
    request.addfinalizer(lambda: sys.modules.pop(module, None))
    return module


def test_installed_plugin_is_loaded_from_its_entry_point(tmp_path, monkeypatch, request):
    fake_distribution(tmp_path, request)
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = draftsmith.build_registry()
    assert reg.pm.has_plugin("fake")
    assert ("layernorm-x", "fake") in reg.names("norm") and reg.provider("norm", "rms") == "builtin"
    assert ("layernorm-x-draft", "fake") in reg.spec_names()
    spec = draftsmith.load_spec("layernorm-x-draft", registry=reg)
    assert spec.draft.norm.kind == "layernorm-x"


def test_entry_points_can_be_left_out(tmp_path, monkeypatch, request):
    fake_distribution(tmp_path, request)
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = draftsmith.build_registry(entry_points=False)
    assert not reg.pm.has_plugin("fake") and "layernorm-x" not in dict(reg.names("norm"))


def test_two_distributions_claiming_one_plugin_name_clash(tmp_path, monkeypatch, request):
    fake_distribution(tmp_path / "a", request, dist="ds-one", norm="norm-a")
    fake_distribution(tmp_path / "b", request, dist="ds-two", norm="norm-b")
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    with pytest.raises(PluginClash, match=r"plugin name 'fake' is used by both distribution 'ds-(one|two)' and "
                                          r"distribution 'ds-(one|two)'"):
        draftsmith.build_registry()


def test_one_distribution_seen_twice_on_the_path_is_one_plugin(tmp_path, monkeypatch, request):
    fake_distribution(tmp_path, request)
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path), *sys.path])  # importlib.metadata yields it twice
    reg = draftsmith.build_registry()
    assert reg.names("norm").count(("layernorm-x", "fake")) == 1


def test_an_entry_point_cannot_take_the_builtin_name(tmp_path, monkeypatch, request):
    fake_distribution(tmp_path, request, ep_name="builtin")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginClash, match=r"'builtin' is used by both draftsmith itself and distribution"):
        draftsmith.build_registry()


def test_two_plugins_providing_one_component_clash_at_start_up(tmp_path, monkeypatch, request):
    fake_distribution(tmp_path / "a", request, dist="ds-one", ep_name="one", norm="same-norm")
    fake_distribution(tmp_path / "b", request, dist="ds-two", ep_name="two", norm="same-norm")
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    with pytest.raises(PluginClash, match=r"norm 'same-norm' is provided by both plugin '(one|two)' and plugin "
                                          r"'(one|two)'"):
        draftsmith.build_registry()


def test_an_installed_plugin_given_again_in_plugins_says_it_is_installed(tmp_path, monkeypatch, request):
    """A plugin both installed and passed to build_registry(plugins=...) was "plugin 'fake' is the same object as
    plugin 'fake'" (a new-user walk, 2026-12-01); the same object twice in plugins= still says remove one."""
    import importlib

    from draftsmith.registry.checks import PluginError

    module = fake_distribution(tmp_path, request)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = importlib.import_module(module)
    with pytest.raises(PluginError) as info:
        draftsmith.build_registry(plugins=[("fake", plugin)])
    assert str(info.value) == (
        "plugin 'fake' is the same object as the installed plugin 'fake' (loaded from its entry point), registered "
        "already; a plugin has one name, the provider its components are listed under: leave it out of plugins= "
        "(it is installed), or pass entry_points=False to give it here")
    assert draftsmith.build_registry(plugins=[("fake", plugin)], entry_points=False).pm.has_plugin("fake")
    with pytest.raises(PluginError, match="registered already; .*: remove one of the two$"):
        draftsmith.build_registry(plugins=[("a", plugin), ("b", plugin)], entry_points=False)


def test_the_same_object_twice_in_plugins_beside_an_installed_one_is_no_entry_point(tmp_path, monkeypatch, request):
    """With an unrelated plugin installed, the same object twice in plugins= was told 'remove one of the two entry
    points' (a review, 2026-12-01)."""
    import types

    from draftsmith.registry.checks import PluginError

    fake_distribution(tmp_path, request)
    monkeypatch.syspath_prepend(str(tmp_path))
    mine = types.ModuleType("mine")
    with pytest.raises(PluginError) as info:
        draftsmith.build_registry(plugins=[("a", mine), ("b", mine)])
    assert str(info.value).endswith("remove one of the two")
