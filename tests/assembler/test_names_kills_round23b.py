"""Kills for assembler/names.py survivors (round 23b): settle's new check that no other missing name of the shape is
the leftover with another suffix compares the leftover's own text (hit[0]), not the name as shown (an ignored
leftover is shown with ' (ignored)', a renamed one by its checkpoint name)."""
import pytest

from draftsmith.assembler.checkpoint import TensorInfo
from draftsmith.assembler.names import Suggester
from draftsmith.assembler.plan import CheckpointMismatch, Expected, plan_load
from draftsmith.components.weights import RuleSet

SHAPE = (128, 64)
MISSING = ["layers.0.mlp.gate_proj.weight", "layers.0.mlp.gate_up_proj.weight"]


def test_an_ignored_short_name_two_missing_names_extend_is_no_hint():
    """An ignored 'mlp.gate' (shown 'mlp.gate.weight (ignored)') against a missing gate_proj and gate_up_proj: both
    extend it, so neither is hinted; read off the shown name, its kind 'weight (ignored)' matched neither and both
    were told the same leftover."""
    leftovers = {"layers.0.mlp.gate.weight": ("layers.0.mlp.gate.weight (ignored)", SHAPE)}
    assert Suggester(leftovers).settle((m, SHAPE) for m in MISSING) == dict.fromkeys(MISSING)


def test_the_load_plan_gives_an_ignored_short_name_to_neither_of_two_missing_names():
    """The same through plan_load with weights.ignore: no 'closest in checkpoint' for either missing name."""
    infos = {"layers.0.mlp.gate.weight": TensorInfo("layers.0.mlp.gate.weight", SHAPE, "F32", None)}
    expected = {n: Expected(SHAPE, "F32") for n in MISSING}
    with pytest.raises(CheckpointMismatch) as e:
        plan_load(infos, RuleSet([], ignore=[r"mlp\.gate\.weight$"]), expected)
    assert "closest" not in str(e.value), str(e.value)
