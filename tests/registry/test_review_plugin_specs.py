"""A plugin's spec or component that goes wrong is named with its plugin and what to do: a SpecSource whose file is
missing or says another name, a component that declares no params model; a name not found while
DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD keeps the installed plugins out says so; a spec folder's file whose name: starts a
list that YAML never closes is skipped as a YAML error."""
import pytest
import yaml

import draftsmith
from draftsmith.components.norms import rms
from draftsmith.hooks import Component, SpecSource
from draftsmith.registry import UnknownComponent
from draftsmith.registry.registry import UnknownSpec
from draftsmith.registry.spec_path import scan_folder
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.specs.documents import SpecNotFound

from test_plugins import Plugin, fresh

NO_AUTOLOAD = "DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD"


def llama(tmp_path, name="plug-spec", norm=None):
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["name"] = name
    if norm is not None:
        data["draft"]["norm"] = norm
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_plugin_spec_whose_file_is_missing_names_the_plugin_and_what_to_do(tmp_path):
    reg = fresh(("acme", Plugin(specs=[SpecSource("acme-spec", tmp_path / "nope.yaml")])))
    with pytest.raises(SpecNotFound) as info:
        draftsmith.load_spec("acme-spec", reg)
    text = str(info.value)
    assert text.startswith(f"spec 'acme-spec' of plugin 'acme' is the file {tmp_path / 'nope.yaml'}, which does "
                           "not exist; reinstall the plugin"), text
    assert f"{NO_AUTOLOAD}=1" in text


def test_a_plugin_spec_whose_file_says_another_name_names_the_plugin_and_both_sides(tmp_path):
    reg = fresh(("acme", Plugin(specs=[SpecSource("acme-other", llama(tmp_path))])))
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec("acme-other", reg)
    [problem] = info.value.problems
    assert problem.message.startswith("the file says 'plug-spec' but is registered as 'acme-other' by plugin 'acme'")
    assert "name: acme-other in this file" in problem.hint and "SpecSource('plug-spec', ...)" in problem.hint
    with pytest.raises(UnknownSpec) as info:   # the name the file says: a bare "no spec named", listing the other
        draftsmith.load_spec("plug-spec", reg)  # (an extension dogfood hunt, 2026-12-01)
    assert str(info.value).splitlines()[-1] == (
        f"note: {llama(tmp_path)} says name: 'plug-spec', but plugin 'acme' registers it as 'acme-other' (its "
        "draftsmith_specs hook's SpecSource name): the plugin must give both one name")
    with pytest.raises(UnknownSpec) as info:
        draftsmith.load_spec("plug-spex", reg)
    assert "note:" not in str(info.value)


def test_a_plugin_component_without_a_params_model_says_so_for_a_key(tmp_path):
    reg = fresh(("acme", Plugin([Component("norm", "plainnorm", rms)])))
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec(llama(tmp_path, norm={"kind": "plainnorm", "scale": 1.0}), reg)
    [problem] = info.value.problems
    assert problem.path == "draft.norm.scale"
    assert problem.allowed == ("no keys: norm 'plainnorm' of plugin 'acme' declares no params model, so a spec can "
                               "give it no keys"), problem.allowed
    assert "Component(..., params=Model)" in problem.hint


def test_a_builtin_components_unknown_key_lists_its_own_params(tmp_path):
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec(llama(tmp_path, norm={"kind": "rms", "scale": 1.0}), fresh())
    [problem] = info.value.problems
    assert problem.allowed == "kind, float32_weight, offset" and "plugin" not in problem.hint


def test_an_unknown_name_says_when_autoloading_is_disabled(tmp_path, monkeypatch):
    spec = llama(tmp_path, norm={"kind": "scalenorm"})
    monkeypatch.setenv(NO_AUTOLOAD, "1")
    off = draftsmith.build_registry()
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec(spec, off)
    [problem] = info.value.problems
    assert problem.message == "unknown norm 'scalenorm'"
    assert f"Plugin autoloading is disabled by {NO_AUTOLOAD}, so an installed plugin that provides it" in problem.hint
    with pytest.raises(UnknownComponent, match=f"disabled by {NO_AUTOLOAD}"):
        off.get("norm", "scalenorm")
    with pytest.raises(LookupError, match=f"\nnote: Plugin autoloading is disabled by {NO_AUTOLOAD}"):
        draftsmith.load_spec("acme-plug", off)
    # entry points left out by the caller, not by the environment: nothing to say
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec(spec, fresh())
    assert NO_AUTOLOAD not in info.value.problems[0].hint


def test_a_suggestion_is_a_name_of_the_same_kind(tmp_path):
    reg = fresh(("acme", Plugin([Component("mlp", "scaleglu", rms)])))
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec(llama(tmp_path, norm={"kind": "scalenorn"}), reg)
    [problem] = info.value.problems
    assert "Did you mean" not in problem.hint and problem.allowed == "rms (builtin)"


@pytest.mark.parametrize("text", ["name: [unclosed\n", "name: {a: [1\n", "name: [a, {b: 1}\nother: 2\n"])
def test_a_name_that_opens_a_list_yaml_never_closes_is_a_yaml_error(tmp_path, text):
    (tmp_path / "bad.yaml").write_text(text)
    found, [(path, why)] = scan_folder(tmp_path)
    assert found == [] and path == tmp_path / "bad.yaml"
    assert why.startswith("no top-level name: (a YAML error at line "), why


def test_a_name_that_is_a_whole_list_is_still_said_as_a_list(tmp_path):
    (tmp_path / "list.yaml").write_text("name: [a, [b]]\nother: 1\n")
    assert scan_folder(tmp_path)[1] == [(tmp_path / "list.yaml", "name: is a list, not a string")]


@pytest.mark.parametrize("name", ["Bad Spec", "-lead", "x" * 201, "caps-Draft"])
def test_a_plugin_spec_name_no_spec_file_may_give_is_refused_at_registration(name, tmp_path):
    """Was registered, then loading it advised `name: Bad Spec` in the file, which the spec refuses (a plugin
    author's dogfooding)."""
    from draftsmith.registry import PluginError

    with pytest.raises(PluginError, match=r"the name must be one a spec file may give as its name: \(lowercase "):
        fresh(("acme", Plugin(specs=[SpecSource(name, llama(tmp_path))])))


def test_an_installed_plugins_spec_mismatch_says_its_own_way_out(tmp_path):
    """An installed plugin (its way out known) is named, not every installed plugin turned off."""
    reg = fresh(("acme", Plugin(specs=[SpecSource("acme-other", llama(tmp_path))])))
    reg.way_outs["acme"] = "fix or uninstall 'ds-acme', or set DRAFTSMITH_DISABLE_PLUGINS=acme to load draftsmith " \
                           "without it"
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec("acme-other", reg)
    [problem] = info.value.problems
    assert problem.hint.endswith("; meanwhile fix or uninstall 'ds-acme', or set DRAFTSMITH_DISABLE_PLUGINS=acme to "
                                 "load draftsmith without it.")
