"""A draft config that holds its tap ids under another trainer's key (tap_layers) loads with the default taps; the
load's note said only that the config names none (a walk-through, 2026-12-01): it names the key nothing reads."""
import draftsmith
from draftsmith.components.eagle3_config import KEY, describe_facts, resolve_taps, unread_ids

REGISTRY = draftsmith.build_registry(entry_points=False)
PARAMS = REGISTRY.get("fusion", "eagle3").params.model_validate({"norm_before_residual": False})
SAID = (f"; it has tap_layers: [1, 3, 6], which nothing reads: if these are its tap ids, state them as {KEY} or in "
        "the spec's draft.fusion.aux_layers.ids")


def test_a_list_of_layer_indices_under_another_key_is_named():
    assert unread_ids({"tap_layers": [1, 3, 6]}) == SAID
    assert unread_ids({"eagle_config": {"aux_layer_ids": [2]}}) == (
        "; it has eagle_config.aux_layer_ids: [2], which nothing reads: if these are its tap ids, state them as "
        f"{KEY} or in the spec's draft.fusion.aux_layers.ids")
    # not lists of integers under a key naming layers: nothing said
    for cfg in ({"num_hidden_layers": 1}, {"layer_types": ["full"]}, {"taps": [1, 2]}, {"tap_layers": []},
                {"tap_layers": [1, True]}, {KEY: [1, 2]}, {"target_layer_ids": [1]}):
        assert unread_ids(cfg) == "", cfg


def test_the_load_and_inspect_say_it_beside_the_default_taps():
    notes: list[str] = []
    assert resolve_taps(PARAMS, {"tap_layers": [1, 3, 6]}, 8, notes) == (2, 4, 5)
    assert notes == [f"aux layers: the draft config names no {KEY} / target_layer_ids, so the taps are the default "
                     f"[2, L//2, L-3] for a 8-layer target: [2, 4, 5] (layer inputs){SAID}"]
    _, lines = describe_facts(PARAMS, {"tap_layers": [1, 3, 6]})
    assert any(line.endswith(SAID) for line in lines), lines
