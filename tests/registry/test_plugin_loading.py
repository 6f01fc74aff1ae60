"""Registering a plugin: hook functions not marked @hookimpl (pluggy ignores them: the plugin contributed nothing,
silently), a class where an instance was meant, and a hook with arguments its hookspec does not give (said with the
hookspec's own arguments) are PluginErrors naming the plugin; an installed plugin that cannot be loaded says how to go
on without it, and ``DRAFTSMITH_DISABLE_PLUGINS`` skips it by name (found by a dogfooding helper)."""
import sys

import pytest

import draftsmith
from draftsmith.hooks import Component, hookimpl
from draftsmith.registry import PluginError

from test_entry_points import fake_distribution
from test_plugins import fresh


class Unmarked:
    def draftsmith_components(self):
        return [Component("norm", "quiet", lambda params, *, dim, eps: None)]


class Marked:
    @hookimpl
    def draftsmith_components(self):
        return []


class WrongArguments:
    @hookimpl
    def draftsmith_detect_layout(self, cfg, names):
        return None


def test_a_hook_not_marked_hookimpl_is_named():
    with pytest.raises(PluginError, match=r"^plugin 'quiet': draftsmith_components is not marked @hookimpl \(from "
                                          r"draftsmith.hooks import hookimpl\), so draftsmith would never call it$"):
        fresh(("quiet", Unmarked()))


def test_a_class_given_for_its_instance_is_named():
    with pytest.raises(PluginError, match=r"^plugin 'cls' is the class Marked, whose hooks would be called without "
                                          r"an instance; register an instance .*plugin = Marked\(\) in its module\)$"):
        fresh(("cls", Marked))
    assert fresh(("inst", Marked())).pm.has_plugin("inst")


def test_wrong_hook_arguments_are_said_with_the_hookspecs_arguments():
    with pytest.raises(PluginError, match=r"It is called as draftsmith_detect_layout\(config, tensor_names\)\."):
        fresh(("args", WrongArguments()))


def _broken_distribution(tmp_path, request):
    module = fake_distribution(tmp_path, request, dist="ds-broken", ep_name="broken", norm="broken-norm")
    (tmp_path / f"{module}.py").write_text("def draftsmith_components():\n    return []\n")   # no @hookimpl
    return module


def test_a_broken_installed_plugin_says_how_to_go_on_and_can_be_skipped_by_name(tmp_path, monkeypatch, request):
    _broken_distribution(tmp_path, request)
    fake_distribution(tmp_path / "good", request)   # a healthy plugin beside it
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path / "good"))
    with pytest.raises(PluginError, match=r"^plugin 'broken' \(entry point broken = .* in distribution 'ds-broken'\): "
                                          r"draftsmith_components is not marked @hookimpl .*; fix or uninstall "
                                          r"'ds-broken', or set DRAFTSMITH_DISABLE_PLUGINS=broken to load draftsmith "
                                          r"without it$"):
        draftsmith.build_registry()
    monkeypatch.setenv("DRAFTSMITH_DISABLE_PLUGINS", " other, broken ")
    reg = draftsmith.build_registry()
    assert not reg.pm.has_plugin("broken") and reg.pm.has_plugin("fake")   # the others still load


def test_a_plugins_error_in_another_package_of_its_distribution_is_the_plugins(tmp_path, monkeypatch, request):
    # the distribution installs its plugin module and a second top-level package holding its models: an error in
    # the second was said as draftsmith's internal error (exit 70)
    import importlib
    import types

    from draftsmith.cli.app import plugin_at_fault
    from test_plugin_mistakes import installed

    (tmp_path / "dsmulti_models.py").write_text("def forward():\n    raise RuntimeError('boom in forward')\n")
    info = tmp_path / "ds_multi-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ds-multi\nVersion: 0.1\n")
    (info / "top_level.txt").write_text("dsmulti\ndsmulti_models\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    request.addfinalizer(lambda: sys.modules.pop("dsmulti_models", None))
    plugin = types.ModuleType("dsmulti")
    plugin.draftsmith_components = hookimpl(lambda: [])
    installed(fresh(("multi", plugin)), monkeypatch, request)
    draftsmith.default_registry()
    with pytest.raises(RuntimeError) as info:
        importlib.import_module("dsmulti_models").forward()
    assert plugin_at_fault(info.value) == "plugin 'multi' (in dsmulti_models.forward, line 2)"


class StaticHooks:
    @staticmethod
    @hookimpl
    def draftsmith_components():
        return []


def test_a_class_whose_hooks_are_static_is_a_plugin_as_pluggy_takes_it():
    # the class check refused every class; only hooks needing an instance make a class the wrong object (a review)
    assert fresh(("static", StaticHooks)).pm.has_plugin("static")


def test_a_helper_named_draftsmith_something_is_no_hook_but_a_typo_of_one_is():
    import types

    helper = types.ModuleType("helper_plugin")
    helper.draftsmith_components = hookimpl(lambda: [])
    helper.draftsmith_cache_dir = lambda: "/tmp"   # a helper: no hook's name, nor a typo of one
    assert fresh(("helper", helper)).pm.has_plugin("helper")
    typo = types.ModuleType("typo_plugin")
    typo.draftsmith_componets = lambda: []
    with pytest.raises(PluginError, match="draftsmith_componets is not marked @hookimpl"):
        fresh(("typo", typo))


class WrongArgumentsBesideAGoodHookAndATypo:
    @hookimpl
    def draftsmith_components(self):
        return []

    @hookimpl
    def draftsmith_detect_layout(self, cfg, names):
        return None

    @hookimpl
    def draftsmith_componentz(self):   # a typo, but pluggy says the wrong arguments first
        return []


# kills loading.py:107  `for n in own if n in hooks and n in text` -> `or` (the good hook would be listed too)
# and   loading.py:105  `n not in hooks and f'unknown hook {n!r}' in text` -> `or` (the typo pluggy did not name
#       would be suggested for a signature mistake)
def test_a_signature_mistake_is_said_for_its_own_hook_only():
    with pytest.raises(PluginError) as info:
        fresh(("two", WrongArgumentsBesideAGoodHookAndATypo()))
    text = str(info.value)
    assert "for hook 'draftsmith_detect_layout'" in text
    assert ". It is called as draftsmith_detect_layout(config, tensor_names). The hooks: " in text
    assert "Did you mean" not in text


def test_a_params_field_only_a_python_object_can_set_is_refused_when_the_plugin_registers():
    # a spec giving it a value got pydantic's "Cannot check `isinstance` when validating from json" as what is
    # allowed, naming no plugin (a dogfooding helper); plain types, paths, enums and nested models stay fine
    import enum
    import pathlib

    import torch
    from pydantic import BaseModel, ConfigDict

    from test_plugins import Plugin

    class TensorParams(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
        scale: float = 1.0
        table: torch.Tensor | None = None

    class Mode(enum.Enum):
        fast = "fast"

    class Inner(BaseModel):
        model_config = ConfigDict(extra="forbid")
        width: int = 1

    class PlainParams(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        path: pathlib.Path = pathlib.Path(".")
        mode: Mode = Mode.fast
        inner: Inner = Inner()
        ids: list[tuple[str, int]] = []

    with pytest.raises(PluginError, match=r"params model TensorParams has a field 'table' whose value must be a "
                                          r"Python object; a spec gives plain data"):
        fresh(("tp", Plugin([Component("norm", "tensor_rms", lambda params, *, dim, eps: None, TensorParams)])))
    assert fresh(("pp", Plugin([Component("norm", "plain_rms", lambda params, *, dim, eps: None, PlainParams)])))


@pytest.mark.parametrize("kind", ["attn_backend", "target"])
def test_params_of_a_kind_a_spec_names_alone_are_refused(kind):
    # a spec chooses an attention backend (decoding.attention: NAME) and a target by name, and their factories take
    # no params: a params model with fields was registered, and no spec could ever set them
    from pydantic import BaseModel, ConfigDict

    from draftsmith.hooks.records import NoParams
    from test_plugins import Plugin

    class Knobs(BaseModel):
        model_config = ConfigDict(extra="forbid")
        block: int = 64

    with pytest.raises(PluginError, match=rf"params model Knobs has fields \('block'\), but a spec names a {kind} "
                                          rf"alone and never gives it params \(its factory is called as "
                                          rf"factory\(\)\), so none could be set"):
        fresh(("kp", Plugin([Component(kind, "knobbed", lambda: None, Knobs)])))

    class Empty(BaseModel):   # a model without fields is NoParams by another name
        model_config = ConfigDict(extra="forbid")

    for params in (NoParams, Empty):
        assert fresh(("np", Plugin([Component(kind, "plain", lambda: None, params)])))


def test_generate_names_the_plugin_whose_detector_chose_the_spec(tmp_path, monkeypatch, request):
    # inspect said "(detected by plugin 'p')", generate --draft only "(detected: ...)" (a dogfooding helper)
    from typer.testing import CliRunner

    from draftsmith.cli import app
    from draftsmith.hooks import LayoutMatch
    from draftsmith.testing import write_eagle3, write_target
    from test_plugin_mistakes import installed
    from test_plugins import Plugin

    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    draft = write_eagle3(tmp_path / "d", target)
    installed(fresh(("det", Plugin(detect=LayoutMatch("eagle3-llama", "the plugin's reading")))), monkeypatch, request)
    res = CliRunner().invoke(app, ["generate", "--draft", str(draft), "--target", str(target), "--token-ids", "1,2",
                                   "--max-new-tokens", "2", "--no-compare", "--threads", "1"])
    assert res.exit_code == 0, res.output
    assert "spec eagle3-llama (detected by plugin 'det': the plugin's reading)" in res.stdout


def test_validate_names_the_plugin_a_spec_comes_from(tmp_path, monkeypatch, request):
    from typer.testing import CliRunner

    from draftsmith.cli import app
    from draftsmith.hooks import SpecSource
    from test_plugin_mistakes import installed, spec_file
    from test_plugins import Plugin

    installed(fresh(("plugspecs", Plugin(specs=[SpecSource("plug-draft", spec_file(tmp_path, {"kind": "rms"}))]))),
              monkeypatch, request)
    res = CliRunner().invoke(app, ["validate", "plug-draft", "demo"])
    assert res.exit_code == 0, res.output
    assert "plug-draft: ok (plug-draft, from plugin 'plugspecs')" in res.stdout and "demo: ok (demo)" in res.stdout


def listed(monkeypatch, request, *folders):
    """`draftsmith list` with the distributions in ``folders`` installed (on sys.path), none disabled."""
    from typer.testing import CliRunner

    from draftsmith.cli import app

    for folder in folders:
        monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delenv("DRAFTSMITH_DISABLE_PLUGINS", raising=False)
    draftsmith.default_registry.cache_clear()
    request.addfinalizer(draftsmith.default_registry.cache_clear)
    return CliRunner().invoke(app, ["list"])


def test_list_leaves_a_broken_installed_plugin_out_and_lists_the_others(tmp_path, monkeypatch, request):
    # one broken plugin stopped `list` as a whole: the others were not shown (a dogfooding helper)
    import os

    _broken_distribution(tmp_path, request)
    fake_distribution(tmp_path / "good", request)
    res = listed(monkeypatch, request, tmp_path, tmp_path / "good")
    assert res.exit_code == 1, res.output
    assert "layernorm-x-draft" in res.stdout and "fake" in res.stdout   # the healthy plugin's spec, listed
    assert res.stderr.startswith("error: plugin 'broken' (entry point broken = "), res.stderr
    assert "set DRAFTSMITH_DISABLE_PLUGINS=broken" in res.stderr
    assert "DRAFTSMITH_DISABLE_PLUGINS" not in os.environ   # for this command only
    with pytest.raises(PluginError):   # the next registry loads every plugin again
        draftsmith.default_registry()


HOOK_FAILURES = {   # a collecting hook that loads, then fails when the registry asks it (a plugin-authoring helper)
    "raises": "@hookimpl\ndef draftsmith_components():\n    raise ValueError('oops in hook')\n",
    "returns an int": "@hookimpl\ndef draftsmith_components():\n    return 5\n",
    "returns a refused record": "@hookimpl\ndef draftsmith_components():\n"
                                "    return [Component('normalization', 'n', lambda params, *, dim, eps: None)]\n",
}


@pytest.mark.parametrize("how", list(HOOK_FAILURES))
def test_list_leaves_a_plugin_whose_collecting_hook_fails_out(tmp_path, monkeypatch, request, how):
    """It listed nothing at all, and the error named no way out (its hook is asked after every plugin loaded)."""
    module = fake_distribution(tmp_path, request, dist="ds-broken", ep_name="broken", norm="broken-norm")
    (tmp_path / f"{module}.py").write_text("from draftsmith.hooks import Component, hookimpl\n\n\n"
                                           + HOOK_FAILURES[how])
    fake_distribution(tmp_path / "good", request)
    res = listed(monkeypatch, request, tmp_path, tmp_path / "good")
    assert res.exit_code == 1, res.output
    assert "layernorm-x-draft" in res.stdout and "eagle3-llama" in res.stdout   # the others, listed
    assert "BROKEN" not in res.stdout and "components" in res.stdout, res.stdout   # loaded without it, in full
    assert res.stderr.startswith("error: draftsmith_components of plugin 'broken' "), res.stderr
    assert "; fix or uninstall 'ds-broken', or set DRAFTSMITH_DISABLE_PLUGINS=broken to load draftsmith without " \
           "it" in res.stderr


def test_a_plugin_in_code_keeps_its_plain_error(tmp_path):
    """A plugin registered in code (build_registry(plugins=...)) has no entry point to disable: no way out said."""
    import types

    from draftsmith.hooks import hookimpl

    @hookimpl
    def draftsmith_components():
        raise ValueError("oops")

    with pytest.raises(PluginError) as info:
        draftsmith.build_registry([("inline", types.SimpleNamespace(draftsmith_components=draftsmith_components))],
                                  entry_points=False)
    line = draftsmith_components.__code__.co_firstlineno + 2   # the first line is the decorator's
    assert str(info.value) == ("draftsmith_components of plugin 'inline' raised ValueError: oops (in "
                               f"test_plugin_loading.{draftsmith_components.__qualname__}, line {line})")
    assert getattr(info.value, "plugin", None) is None


def test_list_leaves_a_plugin_name_two_distributions_claim_out(tmp_path, monkeypatch, request):
    fake_distribution(tmp_path / "one", request, dist="ds-one", ep_name="twin", norm="twin-one")
    fake_distribution(tmp_path / "two", request, dist="ds-two", ep_name="twin", norm="twin-two")
    fake_distribution(tmp_path / "good", request)
    res = listed(monkeypatch, request, *(tmp_path / folder for folder in ("one", "two", "good")))
    assert res.exit_code == 1, res.output
    assert "layernorm-x-draft" in res.stdout and "twin-one-draft" not in res.stdout
    assert "plugin name 'twin' is used by both distribution 'ds-" in res.stderr


def test_a_name_the_disabled_plugins_keep_out_says_so_and_a_misspelt_one_is_warned_of(tmp_path, monkeypatch, request,
                                                                                       caplog):
    """A component of a plugin DRAFTSMITH_DISABLE_PLUGINS keeps out (as draftsmith's errors advise) was a bare
    'unknown norm' (DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD's note said where one was off); a misspelt name disabled
    nothing, silently (an extension dogfood hunt, 2026-12-01)."""
    from draftsmith.registry import loading
    from draftsmith.registry.registry import UnknownComponent

    loading._said_once.cache_clear()
    request.addfinalizer(loading._said_once.cache_clear)
    fake_distribution(tmp_path, request)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("DRAFTSMITH_DISABLE_PLUGINS", "fake,fkae")
    with caplog.at_level("WARNING", logger="draftsmith"):
        reg = draftsmith.build_registry()
        draftsmith.build_registry()   # said once a process
    said = [r.getMessage() for r in caplog.records if "DISABLE" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("DRAFTSMITH_DISABLE_PLUGINS names 'fkae', which is no installed "
                                                 "plugin (installed: "), said
    assert "fake" in said[0].split("(installed: ")[1]
    with pytest.raises(UnknownComponent) as e:
        reg.get("norm", "layernorm-x")
    assert str(e.value).endswith(". DRAFTSMITH_DISABLE_PLUGINS keeps the installed plugin 'fake' out, which may "
                                 "provide it; remove it from DRAFTSMITH_DISABLE_PLUGINS to load it.")
    monkeypatch.setenv("DRAFTSMITH_DISABLE_PLUGINS", "")
    with pytest.raises(UnknownComponent) as e:
        draftsmith.build_registry().get("norm", "no-such-norm")
    assert "DISABLE" not in str(e.value)   # nothing kept out: no note
