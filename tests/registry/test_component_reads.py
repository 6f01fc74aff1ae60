"""Component.reads: the values a component's auto params take for a draft config, asked without building anything
(doctor skips the reading in use); a plugin's answer is guarded like its factory."""
import pytest
from pydantic import BaseModel, ConfigDict

import draftsmith
from draftsmith.hooks import Component
from draftsmith.registry import PluginError
from draftsmith.registry.results import ComponentFailed
from draftsmith.specs.edits import field_info
from test_component_holds import Plugin   # a plugin of the given records


class GateParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    gate: bool | None = None     # None: read the draft config's "gate"


def gated(params, **_):
    raise AssertionError("reads must answer without building")


def registry_with(reads):
    comp = Component("fusion", "gated", gated, GateParams, reads=reads)
    return draftsmith.build_registry(plugins=[("gateplugin", Plugin(comp))], entry_points=False)


SPEC = {"draft": {"fusion": {"kind": "gated"}}}


def test_a_plugin_reads_gives_the_reading_in_use():
    reg = registry_with(lambda params, cfg: {"gate": bool(cfg.get("gate", True)) if params.gate is None
                                             else params.gate})
    assert field_info(SPEC, "draft.fusion.gate", reg, None, {"gate": False}).default is False
    assert field_info(SPEC, "draft.fusion.gate", reg, None, {}).default is True
    assert field_info(SPEC, "draft.fusion.gate", reg).default is None          # no draft config: unknown


def test_a_component_without_reads_leaves_the_reading_unknown():
    assert field_info(SPEC, "draft.fusion.gate", registry_with(None), None, {"gate": False}).default is None


@pytest.mark.parametrize("reads, why", [
    (lambda p, c: 1 / 0, "ZeroDivisionError"),
    (lambda p, c: [("gate", True)], "not a mapping of field names to values"),
])
def test_a_plugin_reads_that_fails_names_the_plugin(reads, why):
    with pytest.raises(ComponentFailed, match=rf"fusion 'gated' \(plugin 'gateplugin'\): reads\(params, "
                                              rf"draft_config\) failed: .*{why}"):
        field_info(SPEC, "draft.fusion.gate", registry_with(reads), None, {})


def test_reads_that_is_not_callable_is_refused_at_registration():
    with pytest.raises(PluginError, match="reads must be callable"):
        registry_with({"gate": True})
