"""An unknown component name with no close registered one (a post-LN layer, which YAML cannot write) is pointed to
what adds one, a package's plugin; the allowed names alone gave no way on (a walk-through, 2026-12-01). A name
close to a registered one keeps its "Did you mean", and one of another kind (gqa as an mlp) gets no plugin hint."""
import pytest

import draftsmith
from draftsmith.errors import SpecError

PLUGIN = ("A part draftsmith lacks comes from a package's plugin (README, \"Adding components from a package\"); "
          "`draftsmith list` shows what is registered.")


def problem(tmp_path, draft: str):
    (tmp_path / "s.yaml").write_text(f"name: s\nextends: eagle3-llama\ndraft:\n  {draft}\n")
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(tmp_path / "s.yaml")
    [p] = info.value.problems
    return p


def test_a_part_no_one_registered_is_pointed_to_plugins(tmp_path):
    p = problem(tmp_path, "layer: {kind: post_ln}")
    assert (p.path, p.message, p.hint) == ("draft.layer.kind", "unknown layer 'post_ln'", PLUGIN)


@pytest.mark.parametrize("draft", ["layer: {kind: lama}", "mlp: {kind: gqa}"])
def test_a_near_name_or_another_kinds_gets_no_plugin_hint(tmp_path, draft):
    assert PLUGIN not in problem(tmp_path, draft).hint
