"""Component.holds: the canonical names a fusion or attention says it holds, which inspect and the closest-family
scores read without building anything; a plugin's answer is guarded like its factory."""
import re

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

import draftsmith
from draftsmith.assembler.fit import held_patterns, holder
from draftsmith.hooks import Component, hookimpl
from draftsmith.registry import PluginError
from draftsmith.registry.results import ComponentFailed
from draftsmith.errors import SpecError
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.specs.loader import load_spec


class GateParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    gate: bool = True


class Plugin:
    def __init__(self, *components):
        self.components = list(components)

    @hookimpl
    def draftsmith_components(self):
        return self.components


def gated(params, **_):
    raise AssertionError("holds must answer without building")


def gated_holds(params):
    return (r"^fc\.weight$",) + ((r"^fc\.gate\.weight$",) if params.get("gate", True) else ())


def registry_with(component):
    return draftsmith.build_registry(plugins=[("gateplugin", Plugin(component))], entry_points=False)


def spec_with(tmp_path, registry, fusion=None, attention=None, hidden=None):
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["name"] = "gated"
    if fusion is not None:
        data["draft"]["fusion"] = fusion
    if attention is not None:
        data["draft"]["attention"] = attention
    if hidden is not None:
        data["draft"].setdefault("norms", {})["hidden"] = hidden
    path = tmp_path / "gated.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_spec(path, registry)


def held(spec, registry, *names):
    holds = holder(spec, registry)
    return {n: holds(n) for n in names}


def test_builtin_fusions_say_what_they_hold(tmp_path):
    reg = draftsmith.build_registry(plugins=[], entry_points=False)
    e3 = held(spec_with(tmp_path, reg, fusion={"kind": "eagle3", "norm_before_residual": "auto"}), reg,
              "fc.weight", "fc.bias", "fc.aux_norm.0.weight",
              "layers.0.hidden_norm.weight", "fc.eh_proj.weight")
    assert e3 == {"fc.weight": True, "fc.bias": False, "fc.aux_norm.0.weight": True,
                  "layers.0.hidden_norm.weight": True, "fc.eh_proj.weight": False}
    e1 = held(load_spec("eagle1-llama", reg), reg, "fc.weight", "fc.bias", "layers.0.hidden_norm.weight")
    assert e1 == {"fc.weight": True, "fc.bias": True, "layers.0.hidden_norm.weight": False}
    no_norms = held(load_spec("eagle3-llama", reg), reg, "fc.aux_norm.0.weight")   # it says fc_norm: false
    assert no_norms == {"fc.aux_norm.0.weight": False}
    no_bias = spec_with(tmp_path, reg, fusion={"kind": "eagle1", "bias": False})
    assert held(no_bias, reg, "fc.bias", "layers.0.hidden_norm.weight") == {
        "fc.bias": False, "layers.0.hidden_norm.weight": False}
    with pytest.raises(SpecError, match="fusion 'eagle1' has no hidden-norm slot"):   # refused, so never held
        spec_with(tmp_path, reg, fusion={"kind": "eagle1"}, hidden=True)
    off = spec_with(tmp_path, reg, fusion={"kind": "eagle3", "norm_before_residual": "auto"}, hidden=False)
    assert held(off, reg, "layers.0.hidden_norm.weight") == {"layers.0.hidden_norm.weight": False}


def test_attention_auto_holds_what_either_choice_holds_and_a_kind_only_its_own(tmp_path):
    reg = draftsmith.build_registry(plugins=[], entry_points=False)
    names = ("layers.0.self_attn.k_proj.weight", "layers.0.self_attn.kv_b_proj.weight")
    assert held(spec_with(tmp_path, reg, attention={"kind": "auto"}), reg, *names) == dict.fromkeys(names, True)
    assert held(spec_with(tmp_path, reg, attention={"kind": "gqa"}), reg, *names) == {names[0]: True,
                                                                                      names[1]: False}
    assert held(spec_with(tmp_path, reg, attention={"kind": "mla"}), reg, *names) == {names[0]: False,
                                                                                      names[1]: True}


def test_a_plugin_fusion_holds_what_its_holds_answers_for_the_spec_params(tmp_path):
    reg = registry_with(Component("fusion", "gated", gated, GateParams, holds=gated_holds))
    on = held(spec_with(tmp_path, reg, fusion={"kind": "gated"}), reg,
              "fc.weight", "fc.gate.weight", "fc.aux_norm.0.weight", "layers.0.hidden_norm.weight")
    assert on == {"fc.weight": True, "fc.gate.weight": True, "fc.aux_norm.0.weight": False,
                  "layers.0.hidden_norm.weight": False}   # its answer leaves the hidden norm out
    off = held(spec_with(tmp_path, reg, fusion={"kind": "gated", "gate": False}), reg, "fc.gate.weight")
    assert off == {"fc.gate.weight": False}


def test_a_plugin_fusion_without_holds_may_hold_any_fc_name_and_the_hidden_norm(tmp_path):
    reg = registry_with(Component("fusion", "gated", gated, GateParams))
    spec = spec_with(tmp_path, reg, fusion={"kind": "gated"})
    assert held(spec, reg, "fc.anything.weight", "layers.0.hidden_norm.weight", "lm_head.weight") == {
        "fc.anything.weight": True, "layers.0.hidden_norm.weight": True, "lm_head.weight": True}
    refused = spec_with(tmp_path, reg, fusion={"kind": "gated"}, hidden=False)
    assert held(refused, reg, "layers.0.hidden_norm.weight") == {"layers.0.hidden_norm.weight": False}


@pytest.mark.parametrize("holds, why", [
    (lambda p: 1 / 0, "ZeroDivisionError"),
    (lambda p: "^fc\\.weight$", "not a tuple of regex strings"),
    (lambda p: ("^fc\\.(weight$",), "'^fc\\.(weight$' is no regex: missing )"),
])
def test_a_plugin_holds_that_fails_names_the_plugin(tmp_path, holds, why):
    reg = registry_with(Component("fusion", "gated", gated, GateParams, holds=holds))
    spec = spec_with(tmp_path, reg, fusion={"kind": "gated"})
    with pytest.raises(ComponentFailed, match=rf"fusion 'gated' \(plugin 'gateplugin'\): holds\(params\) failed: "
                                              rf".*{re.escape(why)}"):
        held_patterns(spec, reg)


def test_holds_that_is_not_callable_is_refused_at_registration():
    with pytest.raises(PluginError, match="holds must be callable"):
        registry_with(Component("fusion", "gated", gated, GateParams, holds=("^fc\\.weight$",)))


def test_holds_on_a_kind_it_is_never_read_for_is_refused_at_registration():
    from draftsmith.components.mlp import MLPParams

    with pytest.raises(PluginError, match="holds is read for a fusion or attention only .* a mlp's would be ignored"):
        registry_with(Component("mlp", "gated", gated, MLPParams, holds=gated_holds))


@pytest.mark.parametrize("params, name, held", [
    ({}, "fc.embed_norm.weight", False), ({"embed_norm": False}, "fc.embed_norm.weight", False),
    ({"embed_norm": True}, "fc.embed_norm.weight", True), ({"bias": False}, "fc.bias", False),
])
def test_eagle1_holds_its_embedding_norm_only_when_asked(params, name, held):
    from draftsmith.components.params import eagle1_holds

    assert any(re.match(p, name) for p in eagle1_holds(params)) is held


@pytest.mark.parametrize("params, held", [({}, True), ({"norm_before_fc": "auto"}, True),
                                          ({"norm_before_fc": True}, True), ({"norm_before_fc": False}, False)])
def test_eagle3_holds_the_norm_over_its_inputs_unless_refused(params, held):
    from draftsmith.components.params import eagle3_holds

    assert any(re.match(p, "fc.input_norm.weight") for p in eagle3_holds(params)) is held
