"""Plugin mistakes that used to escape as internal errors: a collecting hook that fails while its records are read,
one plugin under two names, a name or a params field a spec could never reach, and a factory's result of the wrong
sort (or whose methods fail when the assembler calls them later). Each is a draftsmith error naming the plugin."""
import types

import pytest
from pydantic import BaseModel, ConfigDict, Field

import draftsmith
from draftsmith.components.norms import rms
from draftsmith.components.targets import TargetArch
from draftsmith.components.weights import RegexRule, RuleSet
from draftsmith.hooks import Component, hookimpl
from draftsmith.registry import ComponentFailed, PluginClash, PluginError

from test_entry_points import fake_distribution
from test_plugins import Plugin, fresh


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def built(kind, make, *args, **context):
    """What ``fresh(plugin).build`` returns for a plugin component ``(kind, 'mine')`` made by ``make``."""
    return fresh(("mine", Plugin([Component(kind, "mine", make, Strict)]))).build(kind, "mine", *args, **context)


# --- collecting hooks: what they raise while read, and wrappers --------------------------------------------------

def test_a_generator_hook_that_raises_while_read_is_named():
    class Gen:
        @hookimpl
        def draftsmith_components(self):
            yield Component("norm", "genorm", rms)
            raise RuntimeError("boom in generator")

    with pytest.raises(PluginError, match=r"^draftsmith_components of plugin 'gen' raised RuntimeError: boom in "
                                          r"generator \(in test_plugin_results\.[\w.<>]+\.Gen\.draftsmith_components, "
                                          r"line 36\)$"):   # where in the generator
        fresh(("gen", Gen()))


def test_a_generator_hook_that_finishes_provides_its_records():
    class Gen:
        @hookimpl
        def draftsmith_components(self):
            yield Component("norm", "genorm", rms)

    assert ("genorm", "gen") in fresh(("gen", Gen())).names("norm")


@pytest.mark.parametrize("marker", [{"hookwrapper": True}, {"wrapper": True}])
def test_a_collecting_hook_wrapper_is_refused(marker):
    class Wrapping:
        @hookimpl(**marker)
        def draftsmith_specs(self):
            return (yield)

    with pytest.raises(PluginError, match=r"^draftsmith_specs of plugin 'wrap' is a hook wrapper; the registry calls "
                                          r"each plugin's draftsmith_specs on its own"):
        fresh(("wrap", Wrapping()))


# --- one plugin, one name --------------------------------------------------------------------------------------------

def test_one_plugin_object_under_two_names_is_refused_naming_both():
    mod = types.ModuleType("twice")
    mod.draftsmith_components = hookimpl(lambda: [])
    with pytest.raises(PluginError, match=r"^plugin 'b' is the same object as plugin 'a', registered already; a "
                                          r"plugin has one name"):
        fresh(("a", mod), ("b", mod))


def test_two_entry_points_of_one_module_name_both_and_the_distribution(tmp_path, monkeypatch, request):
    module = fake_distribution(tmp_path, request, dist="rv-dup")
    (tmp_path / "rv_dup-0.1.dist-info" / "entry_points.txt").write_text(f"[draftsmith]\nrva = {module}\n"
                                                                         f"rvb = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as info:
        draftsmith.build_registry()
    assert str(info.value) == (
        f"plugin 'rvb' (entry point rvb = {module} in distribution 'rv-dup') is the same object as plugin 'rva' "
        f"(entry point rva = {module} in distribution 'rv-dup'), registered already; a plugin has one name, the "
        "provider its components are listed under: remove one of the two entry points; fix or uninstall 'rv-dup', "
        "or set DRAFTSMITH_DISABLE_PLUGINS=rvb to load draftsmith without it")


def test_a_plugin_given_the_builtin_name_clashes():
    with pytest.raises(PluginClash, match=r"^plugin name 'builtin' is taken by draftsmith itself; register plugin "
                                          r"'builtin' under another name"):
        fresh(("builtin", Plugin()))


# --- records a spec could never reach ------------------------------------------------------------------------------

class KindParams(Strict):
    kind: str = "pre"


class MethodParams(Strict):
    method: str = "awq"


class AliasParams(Strict):
    variant: str = Field("pre", alias="kind")


@pytest.mark.parametrize("record, message", [
    (Component("attention", "auto", rms), r"the name 'auto' is a spec's own word \(`attention: \{kind: auto\}` is "
                                          r"mla when the draft config has MLA fields, else gqa\), "
                                          r"so a spec could never build this attention: rename it"),
    (Component("norm", "knorm", rms, KindParams), r"params model KindParams has a field 'kind', but 'kind' is the key "
                                                  r"a spec names the norm by \(\{kind: knorm, \.\.\.\}\), so a spec "
                                                  r"can never give it: rename the field"),
    (Component("norm", "knorm", rms, AliasParams), r"params model AliasParams has a field 'variant' \(alias 'kind'\)"),
    (Component("quant", "awq", rms, MethodParams), r"params model MethodParams has a field 'method', but 'method' is "
                                                   r"the key a spec names the quant by \(\{method: awq, \.\.\.\}\)"),
    (Component("norm", "nodoc", rms, doc=None), r"doc must be a string, '' for none \(draftsmith list shows it\)"),
])
def test_a_record_a_spec_could_never_use_is_refused_naming_the_plugin(record, message):
    with pytest.raises(PluginError, match=r"^draftsmith_components of plugin 'p' returned .*: " + message):
        fresh(("p", Plugin([record])))


def test_a_selector_word_is_a_params_field_where_another_key_selects():
    fresh(("p", Plugin([Component("quant", "q", lambda params, *, module: None, KindParams),   # quant: `method`
                        Component("attention", "automatic", rms)])))


# --- results of the wrong sort ---------------------------------------------------------------------------------------

class DuckRule:
    """A plugin's own rule: ``apply`` answers whatever it was given for fc.* names."""

    inverse = None

    def __init__(self, answer=None):
        self.answer = answer

    def apply(self, name):
        if not name.startswith("fc."):
            return None
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def invert(self, name):
        return None

    def describe(self, index=None):
        return "duck"


@pytest.mark.parametrize("kind, make, args, message", [
    ("weight_rule", lambda params: "not a rule", (Strict(),),
     r"its factory returned 'not a rule' \(it has no apply, invert, describe, inverse\); the assembler calls it as "
     r"factory\(params\) and needs a rule"),
    ("attn_backend", lambda: "sdpa", (), r"its factory returned 'sdpa' \(not callable\); the assembler calls it as "
                                         r"factory\(\) and needs an attention function"),
    ("target", lambda: {"attention": "gqa"}, (), r"its factory returned \{'attention': 'gqa'\} \(it has no check, "
                                                 r"attention_recipe, window, recurrent\)"),
    ("norm", lambda params, *, dim, eps: "rms", (Strict(),), r"its factory returned 'rms' \(not a torch.nn.Module\)"),
])
def test_a_result_of_the_wrong_sort_is_refused_saying_what_it_lacks(kind, make, args, message):
    context = {"dim": 4, "eps": 1e-6} if kind == "norm" else {}
    with pytest.raises(ComponentFailed, match=rf"^{kind} 'mine' \(plugin 'mine'\): " + message):
        built(kind, make, *args, **context)


@pytest.mark.parametrize("answer, message", [
    (KeyError("fc.weight"), r"its apply\('fc.weight'\) raised KeyError: 'fc.weight' \(in "
                            r"test_plugin_results\.DuckRule\.apply, line \d+\)$"),
    (5, r"its apply\('fc.weight'\) returned 5; apply must return str or None$"),
])
def test_a_plugin_rule_that_fails_while_names_are_mapped_is_named(answer, message):
    rules = RuleSet([built("weight_rule", lambda params: DuckRule(answer), Strict())])
    assert rules.to_canonical("norm.weight") == ("norm.weight", None)
    with pytest.raises(ComponentFailed, match=r"^weight_rule 'mine' \(plugin 'mine'\): " + message) as info:
        rules.to_canonical("fc.weight")
    assert isinstance(info.value.__cause__, KeyError) or answer == 5


def test_a_plugin_target_whose_check_raises_is_named():
    class Target:
        recurrent = False

        def check(self, cfg):
            raise AttributeError("no num_experts")

        def attention_recipe(self):
            return "gqa", {}

        def window(self, cfg, idx):
            return None

    arch = built("target", Target)
    assert arch.attention_recipe() == ("gqa", {}) and arch.recurrent is False
    with pytest.raises(ComponentFailed, match=r"^target 'mine' \(plugin 'mine'\): its check\(.*\) raised "
                                              r"AttributeError: no num_experts"):
        arch.check(types.SimpleNamespace())


def test_a_plugin_result_of_draftsmiths_own_classes_is_left_as_it_is():
    rule = RegexRule(match=r"^midlayer\.", replace="layers.0.")
    assert built("weight_rule", lambda params: rule, Strict()) is rule   # its ${key} placeholders still bind
    arch = TargetArch(recurrent=True)
    assert built("target", lambda: arch) is arch


# --- a module part that cannot be built on meta ------------------------------------------------------------------

@pytest.mark.parametrize("rebuilds", [False, True])
def test_a_plugin_module_with_a_buffer_nothing_computes_is_refused_before_any_tensor_is_read(tmp_path, monkeypatch,
                                                                                            rebuilds):
    # a non-persistent buffer stayed on meta: "parameters left uninitialised after loading", after both models were
    # read, naming neither the part nor reset_buffers (a review); with reset_buffers it loads and decodes
    import torch
    import yaml

    from draftsmith.assembler import load
    from draftsmith.components.norms import RMSNorm
    from draftsmith.specs.catalog import BUILTIN_DIR
    from draftsmith.testing import write_eagle3, write_target

    class Scaled(RMSNorm):
        def __init__(self, dim, eps):
            super().__init__(dim, eps)
            self.register_buffer("scale", torch.ones(()), persistent=False)

        def forward(self, x):
            return super().forward(x) * self.scale

    class Rebuilt(Scaled):
        def reset_buffers(self, device):
            self.scale = torch.ones((), device=device)

    cls = Rebuilt if rebuilds else Scaled
    reg = fresh(("scaled", Plugin([Component("norm", "scaled", lambda params, *, dim, eps: cls(dim, eps))])))
    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=4, vocab_size=32)
    draft = write_eagle3(tmp_path / "d", target, aux_ids=[0, 1, 2])
    spec = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text()) | {"name": "scaled"}
    spec["draft"]["norm"] = {"kind": "scaled"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    if not rebuilds:
        monkeypatch.setattr(load, "read_tensors", lambda *a, **k: pytest.fail("a tensor was read"))
        # the part named by the component that made it (was its class alone: a plugin-authoring helper)
        with pytest.raises(ComponentFailed, match=r"module layers\.0\.input_layernorm \(norm 'scaled' \(plugin "
                                                  r"'scaled'\)\) holds the non-persistent buffer\(s\) 'scale' .* "
                                                  r"reset_buffers\(device\)"):
            draftsmith.assemble(draftsmith.load_spec(tmp_path / "s.yaml", reg), target, draft, registry=reg)
        return
    model = draftsmith.assemble(draftsmith.load_spec(tmp_path / "s.yaml", reg), target, draft, registry=reg)
    assert model.generate([1, 2, 3], max_new_tokens=6).token_ids == \
        model.generate_baseline([1, 2, 3], max_new_tokens=6).token_ids


def test_a_plugin_fusion_without_what_the_assembler_reads_is_named_not_an_attribute_error():
    # a plain nn.Linear as a fusion raised AttributeError 'first_in_factor' inside build_draft (exit 70)
    from torch import nn

    with pytest.raises(ComponentFailed, match=r"^fusion 'mine' \(plugin 'mine'\): its factory returned Linear.* \(it "
                                              r"has no fuse, taps, first_mix, first_in_factor, norm_before_residual, "
                                              r"norm_output\)"):
        built("fusion", lambda params, **_: nn.Linear(4, 2), Strict(), hidden=2, target_width=4, draft_config={},
              target_layers=4, norm=None)
