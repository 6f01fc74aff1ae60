"""The mistakes a plugin author makes, each a draftsmith error naming the plugin (and the component, the hook or the
entry point) at the moment it can first be seen: when the plugin registers, or when its factory builds."""
import sys

import pytest
import yaml
from pydantic import BaseModel, ConfigDict
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import USER_ERROR, app
from draftsmith.components.norms import rms
from draftsmith.components.weights import RegexRule
from draftsmith.hooks import Component, LayoutMatch, SpecSource, hookimpl
from draftsmith.registry import ComponentFailed, PluginClash, PluginError
from draftsmith.registry import registry as registry_module
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_target

from test_entry_points import fake_distribution
from test_plugins import EAGLE3, Plugin, fresh


class OffsetParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    offset: float = 1.0


def spec_file(tmp_path, norm: dict, name="plug-draft", rules=None):
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["name"], data["draft"]["norm"] = name, norm
    if rules is not None:
        data["weights"]["rules"] = rules
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    target = write_target(root / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    return target, write_eagle3(root / "d", target)


def assemble_with(tmp_path, pair, factory, params=OffsetParams, norm=None):
    reg = fresh(("offsetnorm", Plugin([Component("norm", "offset_rms", factory, params)])))
    spec = spec_file(tmp_path, norm or {"kind": "offset_rms"})
    return draftsmith.assemble(draftsmith.load_spec(spec, reg), target=pair[0], draft=pair[1], registry=reg)


# --- factories: what they raise and what they return ----------------------------------------------------------------

def test_a_factory_that_raises_is_named_with_its_plugin_and_the_call_the_assembler_makes(tmp_path, pair):
    def offset_rms(params, *, dim, eps):
        raise ValueError("offset must be in [0, 1]")

    with pytest.raises(ComponentFailed) as info:
        assemble_with(tmp_path, pair, offset_rms)
    where = f"test_plugin_mistakes.{offset_rms.__qualname__}, line {offset_rms.__code__.co_firstlineno + 1}"
    assert str(info.value) == ("norm 'offset_rms' (plugin 'offsetnorm') failed to build: ValueError: offset must be "
                               f"in [0, 1] (in {where}); the assembler calls it as factory(params, *, dim, eps) and "
                               "needs a norm module whose parameter is `weight` of shape [dim]")
    assert isinstance(info.value.__cause__, ValueError)  # --debug shows the plugin's own traceback


def test_a_factory_with_the_wrong_keywords_is_told_the_call(tmp_path, pair):
    with pytest.raises(ComponentFailed, match=r"failed to build: TypeError: .*unexpected keyword argument 'eps'; "
                                              r"the assembler calls it as factory\(params, \*, dim, eps\)"):
        assemble_with(tmp_path, pair, lambda params, *, dim: rms(params, dim=dim, eps=1e-6))


def test_a_factory_that_returns_no_module_is_refused_before_the_checkpoint_is_blamed(tmp_path, pair):
    with pytest.raises(ComponentFailed, match=r"^norm 'offset_rms' \(plugin 'offsetnorm'\): its factory returned "
                                              r"None; the assembler calls it as"):
        assemble_with(tmp_path, pair, lambda params, *, dim, eps: None)


def test_a_backend_factory_that_returns_none_is_refused(tmp_path, pair):
    reg = fresh(("nothing", Plugin([Component("attn_backend", "nothing", lambda: None)])))
    path = spec_file(tmp_path, {"kind": "rms"})
    data = yaml.safe_load(path.read_text())
    data["decoding"]["attention"] = "nothing"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ComponentFailed, match=r"^attn_backend 'nothing' \(plugin 'nothing'\): its factory returned "
                                              r"None; the assembler calls it as factory\(\) and needs an attention "
                                              r"function"):
        draftsmith.assemble(draftsmith.load_spec(path, reg), target=pair[0], draft=pair[1], registry=reg)


def test_a_working_plugin_norm_is_built_with_its_params(tmp_path, pair):
    seen = []

    def offset_rms(params, *, dim, eps):
        seen.append(params.offset)
        return rms(params, dim=dim, eps=eps)

    model = assemble_with(tmp_path, pair, offset_rms, norm={"kind": "offset_rms", "offset": 0.5})
    assert seen and set(seen) == {0.5}
    assert model.generate([1, 2, 3], max_new_tokens=4, stop=[]).token_ids == \
        model.generate_baseline([1, 2, 3], max_new_tokens=4, stop=[]).token_ids


def test_a_plugin_weight_rule_is_built_by_its_factory(tmp_path, pair):
    made = []

    def prefix(params):
        made.append(params.old)
        return RegexRule(match="^" + params.old.replace(".", r"\."), replace="layers.0.")

    class PrefixParams(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        old: str

    reg = fresh(("prefixes", Plugin([Component("weight_rule", "prefix", prefix, PrefixParams)])))
    spec = spec_file(tmp_path, {"kind": "rms"}, rules=[{"kind": "prefix", "old": "midlayer."}])
    draftsmith.assemble(draftsmith.load_spec(spec, reg), target=pair[0], draft=pair[1], registry=reg)
    assert made and set(made) == {"midlayer."}


def installed(reg, monkeypatch, request) -> None:
    """Make ``reg`` what default_registry() returns, as if its plugins were installed, until the test ends."""
    monkeypatch.setattr(registry_module, "build_registry", lambda **_: reg)
    registry_module.default_registry.cache_clear()
    request.addfinalizer(registry_module.default_registry.cache_clear)


def test_the_cli_prints_a_failing_factory_as_a_message(tmp_path, pair, monkeypatch, request):
    def offset_rms(params, *, dim, eps):
        raise ValueError("offset must be in [0, 1]")

    reg = fresh(("offsetnorm", Plugin([Component("norm", "offset_rms", offset_rms, OffsetParams)],
                                      [SpecSource("plug-draft", spec_file(tmp_path, {"kind": "offset_rms"}))])))
    installed(reg, monkeypatch, request)
    res = CliRunner().invoke(app, ["generate", "--spec", "plug-draft", "--target", str(pair[0]), "--draft",
                                   str(pair[1]), "--token-ids", "1,2", "--max-new-tokens", "2", "--no-compare"])
    assert res.exit_code == USER_ERROR, res.output
    assert "error: norm 'offset_rms' (plugin 'offsetnorm') failed to build: ValueError" in res.output
    assert "Traceback" not in res.output and "internal error" not in res.output


def test_validate_does_not_blame_the_checkpoints_for_a_failing_factory(tmp_path, pair, monkeypatch, request):
    """validate said "the spec is valid, but its checkpoints do not fit" for a plugin's factory that raised (a
    plugin-authoring helper): the checkpoints were fine."""
    def offset_rms(params, *, dim, eps):
        raise ValueError("offset must be in [0, 1]")

    spec = spec_file(tmp_path, {"kind": "offset_rms"})
    text = spec.read_text() + f"checkpoints: {{target: '{pair[0]}', draft: '{pair[1]}'}}\n"
    spec.write_text(text)
    reg = fresh(("offsetnorm", Plugin([Component("norm", "offset_rms", offset_rms, OffsetParams)])))
    installed(reg, monkeypatch, request)
    res = CliRunner().invoke(app, ["validate", str(spec)])
    assert res.exit_code == 1, res.output
    lead, said = res.stderr.splitlines()[:2]
    assert lead == f"{spec}: the spec (plug-draft) is valid, but building its draft for these checkpoints failed:"
    assert said.startswith("error: norm 'offset_rms' (plugin 'offsetnorm') failed to build: ValueError: offset must")


# --- records: checked when the plugin registers ---------------------------------------------------------------------

class Loose(BaseModel):  # pydantic's default: unknown keys are dropped
    offset: float = 1.0


@pytest.mark.parametrize("record, message", [
    (Component("nrom", "offset_rms", rms), r"kind 'nrom' is none the assembler asks for\. Did you mean 'norm'\? "
                                           r"kinds: layer, attention, "),
    (Component("norm", "", rms), r"the name must be a non-empty string"),
    (Component("norm", "offset_rms", "rms"), r"the factory must be callable: the assembler calls a norm's as "
                                             r"factory\(params, \*, dim, eps\)"),
    (Component("norm", "offset_rms", rms, dict), r"params must be a pydantic model class"),
    (Component("norm", "offset_rms", rms, Loose), r"params model Loose must refuse unknown keys, or a misspelt key "
                                                  r"in a spec is silently ignored: set model_config = "
                                                  r"ConfigDict\(extra='forbid'\)"),
])
def test_a_component_record_that_breaks_the_contract_is_refused_naming_the_plugin(record, message):
    said = rf"item 0 is Component\(kind={record.kind!r}, name={record.name!r}, \.\.\.\)"   # not a repr cut short
    with pytest.raises(PluginError, match=rf"^draftsmith_components of plugin 'offsetnorm' returned a list whose "
                                          rf"{said}: " + message):
        fresh(("offsetnorm", Plugin([record])))


def test_a_list_holding_a_tuple_names_the_item_not_the_list():
    """[("norm", "x", rms)]: the list's item 0 is a tuple, said as one (the message said the hook 'returned' a
    three-item list, quoting the tuple as short() quotes one, in brackets)."""
    with pytest.raises(PluginError, match=r"^draftsmith_components of plugin 'offsetnorm' returned a list whose item 1 "
                                          r"is a tuple, \['norm', 'offset_rms', .*\]: expected draftsmith\.hooks\."
                                          r"Component records$"):
        fresh(("offsetnorm", Plugin([Component("norm", "fine", rms), ("norm", "offset_rms", rms)])))


def test_a_bare_record_instead_of_a_list_is_refused():
    comp = Component("norm", "offset_rms", rms)

    class Bare:
        @hookimpl
        def draftsmith_components(self):
            return comp

    # the record's kind and name, not a repr cut inside its factory's (an extension dogfood hunt, 2026-12-01)
    with pytest.raises(PluginError, match=r"^draftsmith_components of plugin 'bare' returned Component\(kind='norm', "
                                          r"name='offset_rms', \.\.\.\); it "
                                          r"returns a list of draftsmith.hooks.Component records"):
        fresh(("bare", Bare()))


def test_a_spec_source_with_a_string_path_is_refused(tmp_path):
    with pytest.raises(PluginError, match=r"draftsmith_specs of plugin 'p' returned .*: path must be a pathlib.Path"):
        fresh(("p", Plugin(specs=[SpecSource("x", str(tmp_path / "x.yaml"))])))


def test_a_collecting_hook_that_raises_is_named():
    class Broken:
        @hookimpl
        def draftsmith_specs(self):
            raise KeyError("no such file")

    with pytest.raises(PluginError, match=r"^draftsmith_specs of plugin 'broken' raised KeyError: 'no such file'"):
        fresh(("broken", Broken()))


def test_a_hookimpl_with_arguments_the_hookspec_does_not_give_is_refused_with_the_reason():
    class Wrong:
        @hookimpl
        def draftsmith_components(self, registry):
            return []

    with pytest.raises(PluginError) as info:
        fresh(("wrong", Wrong()))
    text = str(info.value)
    assert text.startswith("plugin 'wrong' does not fit draftsmith's hooks: ") and "{'registry'}" in text
    assert "The hooks: draftsmith_components, draftsmith_detect_layout, draftsmith_specs" in text


def test_clash_messages_say_what_to_rename(tmp_path):
    spec = SpecSource("demo", spec_file(tmp_path, {"kind": "rms"}, name="demo"))
    with pytest.raises(PluginClash, match=r"^spec 'demo' is provided by both plugin 'builtin' and plugin 'p'; "
                                          r"plugin 'p' must rename its spec: draftsmith's own names are kept"):
        fresh(("p", Plugin(specs=[spec])))


# --- entry points ---------------------------------------------------------------------------------------------------

def test_a_plugin_that_cannot_be_imported_is_named_with_its_entry_point_and_distribution(tmp_path, monkeypatch,
                                                                                        request):
    module = fake_distribution(tmp_path, request, dist="ds-broken")
    (tmp_path / f"{module}.py").write_text("import not_a_module_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as info:
        draftsmith.build_registry()
    assert str(info.value) == (f"plugin 'fake' (entry point fake = {module} in distribution 'ds-broken') cannot be "
                               "imported: ModuleNotFoundError: No module named 'not_a_module_xyz' (in "
                               f"{module}.<module>, line 1); fix or uninstall "
                               "'ds-broken', or set DRAFTSMITH_DISABLE_PLUGINS=fake to load draftsmith without it")
    monkeypatch.setenv("DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD", "1")   # the way around it
    assert not draftsmith.build_registry().pm.has_plugin("fake")
    monkeypatch.setenv("DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD", "0")
    with pytest.raises(PluginError):
        draftsmith.build_registry()
    sys.modules.pop(module, None)


def test_an_entry_point_named_builtin_is_told_to_rename_it(tmp_path, monkeypatch, request):
    fake_distribution(tmp_path, request, ep_name="builtin", dist="ds-mine")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginClash, match=r"rename the entry point in 'ds-mine' \('builtin' is draftsmith's own\)"):
        draftsmith.build_registry()


# --- detectors ------------------------------------------------------------------------------------------------------

class Raising:
    @hookimpl
    def draftsmith_detect_layout(self, config, tensor_names):
        raise ValueError("'nope' is not in list")


@pytest.mark.parametrize("plugin, message", [
    (Plugin(detect="eagle3-llama"), r"returned 'eagle3-llama'; a detector returns a draftsmith.hooks.LayoutMatch "
                                    r"or None"),
    (Raising(), r"raised ValueError: 'nope' is not in list"),
    (Plugin(detect=LayoutMatch("eagle3-lama", "mine")), r"answered spec 'eagle3-lama', which no plugin provides\. "
                                                        r"Did you mean 'eagle3-llama'\?"),
    # malformed fields were accepted: a str of assumptions said one letter a line, a None reason said "None"
    (Plugin(detect=LayoutMatch("eagle3-llama", "mine", "one assumption")),
     r"returned a LayoutMatch whose assumptions 'one assumption' \(wanted a tuple of str, one per assumption"),
    (Plugin(detect=LayoutMatch("eagle3-llama", None)), r"returned a LayoutMatch whose reason None \(wanted a non-"),
    (Plugin(detect=LayoutMatch("eagle3-llama", " ", (1,))),
     r"returned a LayoutMatch whose reason ' ' \(wanted .*\); assumptions \[1\] \(wanted a tuple of str"),
    (Plugin(detect=LayoutMatch(["eagle3-llama"], "mine")), r"returned a LayoutMatch whose spec \['eagle3-llama'\] "),
])
def test_a_detector_mistake_names_its_plugin(plugin, message):
    with pytest.raises(PluginError, match=r"^draftsmith_detect_layout of plugin 'det' " + message):
        fresh(("det", plugin)).detect_layout({}, EAGLE3)


def test_the_answering_detector_is_named_in_the_match():
    match = fresh(("det", Plugin(detect=LayoutMatch("eagle3-llama", "mine")))).detect_layout({}, EAGLE3)
    assert (match.spec, match.plugin) == ("eagle3-llama", "det")
    listed = fresh(("det", Plugin(detect=LayoutMatch("eagle3-llama", "mine", ["a", "b"])))).detect_layout({}, EAGLE3)
    assert listed.assumptions == ("a", "b")   # a list of str is taken, as the tuple it means
    assert fresh().detect_layout({}, EAGLE3).plugin == "builtin"


def test_list_shows_every_spec_and_marks_a_broken_plugin_spec(tmp_path, monkeypatch, request):
    path = spec_file(tmp_path, {"kind": "rms", "ofset": 0.5}, name="broken-draft")
    reg = fresh(("offsetnorm", Plugin([Component("norm", "offset_rms", rms, OffsetParams, doc="a norm")],
                                      [SpecSource("broken-draft", path)])))
    installed(reg, monkeypatch, request)
    res = CliRunner().invoke(app, ["list", "--params"])
    assert res.exit_code == 1
    assert "BROKEN: draft.norm.ofset: unknown" in res.stdout and "eagle3-llama" in res.stdout
    assert "broken-draft.yaml has 1 problem" in res.stderr
    assert "offset_rms" in res.stdout and "offset (1.0)" in res.stdout   # a component's params, with defaults


def test_a_detector_hook_wrapper_still_lets_the_detectors_answer():
    seen = []

    class Wrapping:
        @hookimpl(wrapper=True)
        def draftsmith_detect_layout(self, config, tensor_names):
            seen.append(len(tensor_names))
            return (yield)

    match = fresh(("wrap", Wrapping())).detect_layout({}, EAGLE3)
    assert seen == [len(EAGLE3)] and match.spec == "eagle3-llama"


def test_a_signature_mistake_suggests_no_hook_name():
    class Wrong:
        draftsmith_api_version = 1

        @hookimpl
        def draftsmith_components(self, registry):
            return []

    with pytest.raises(PluginError) as info:
        fresh(("wrong", Wrong()))
    assert "Did you mean" not in str(info.value)


@pytest.mark.parametrize("args", [["list", "--params"], ["validate", "demo"]])   # rich tables, typer echo
def test_a_reader_that_left_ends_the_command_quietly(args):
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "draftsmith", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()   # gone before the first write: every write to stdout meets a closed pipe
    assert (proc.wait(timeout=120), proc.stderr.read()) == (141, "")


def test_a_builtin_factorys_own_exception_stays_an_internal_error(monkeypatch):
    from draftsmith.registry.registry import Provided

    reg = fresh()
    def broken(params, *, dim, eps):
        raise ZeroDivisionError("a bug in draftsmith")
    reg.components[("norm", "rms")] = Provided(Component("norm", "rms", broken), "builtin")
    with pytest.raises(ZeroDivisionError):   # not a ComponentFailed: the CLI shows it as a bug (exit 70)
        reg.build("norm", "rms", None, dim=4, eps=1e-6)


def test_a_record_is_said_by_its_fields_and_a_record_class_as_a_type():
    """brief(): a record of two fields is said whole (no '...'); a record class in the list is a type, said as one
    (a review of the change: 'item 0 is <class ...>' lost the word)."""
    from pathlib import Path

    from draftsmith.registry.checks import brief

    assert brief(SpecSource("acme", Path("a.yaml"))) == "SpecSource(name='acme', path=PosixPath('a.yaml'))"
    assert brief(Component("norm", "x", rms)) == "Component(kind='norm', name='x', ...)"
    with pytest.raises(PluginError, match=r"returned a list whose item 0 is a type, <class '.*Component'>: "):
        fresh(("offsetnorm", Plugin([Component])))
