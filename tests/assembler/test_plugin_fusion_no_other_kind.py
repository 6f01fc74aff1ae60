"""A user's spec whose fusion is a plugin's (an EAGLE-3 variant registered under its own name, README's "Adding
components from a package") is not told its EAGLE-3 draft "is detected as eagle3-llama" for the kind names differing
(4105492's other_fusion compared names only): that note also silenced the spec-field notes, the num_layers one here,
which f378c60 gave. Two built-in kinds that differ (an EAGLE-1 draft under an EAGLE-3 spec) are still told."""
import dataclasses

import pytest

import draftsmith
from draftsmith.errors import DraftsmithError
from draftsmith.hooks import hookimpl
from draftsmith.testing import SMALL, write_eagle3, write_target


class Variant:
    @hookimpl
    def draftsmith_components(self):
        eagle3 = draftsmith.default_registry().components[("fusion", "eagle3")].record
        return [dataclasses.replace(eagle3, name="eagle3x")]


def test_a_plugin_fusion_spec_keeps_its_field_notes(tmp_path):
    registry = draftsmith.build_registry(plugins=[("variant", Variant())], entry_points=False)
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target)
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nextends: eagle3-llama\n"
                    "draft: {num_layers: 2, fusion: {kind: eagle3x, norm_before_residual: auto}}\n")
    with pytest.raises(DraftsmithError) as err:
        draftsmith.assemble(draftsmith.load_spec(path, registry), target=target, draft=draft, registry=registry)
    notes = getattr(err.value, "__notes__", [])
    assert not any(" is detected as " in n for n in notes), notes
    assert any("draft.num_layers is 2; the checkpoint holds 1 layer" in n for n in notes), notes
