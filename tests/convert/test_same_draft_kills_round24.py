"""Kills for convert/same_draft.py survivors (round 24): a value the proposed spec states where the family spec
leaves it out is a difference; only the aux ids list the family leaves to the config is not."""
from draftsmith.convert.same_draft import spec_differences


def test_a_value_the_family_leaves_out_is_a_difference_but_aux_ids_left_to_the_config():
    """catches same_draft.py spec_differences: 'path == "draft.fusion.aux_layers.ids" and family is None' -> 'or'
    (every value the family spec leaves out, not only the aux ids it leaves to the config, was no difference: a
    proposed spec stating a norm or quant the family lacks read as the family's own)."""
    proposed = {"draft": {"fusion": {"aux_layers": {"ids": [1, 2]}}, "mlp": {"kind": "gelu"}}, "quant": {"x": 1}}
    family = {"draft": {"fusion": {"aux_layers": {}}}}
    assert spec_differences(proposed, family) == [("draft.mlp", {"kind": "gelu"}), ("quant", {"x": 1})]
    assert spec_differences({"draft": {"fusion": {"aux_layers": {"ids": [1, 2]}}}},
                            {"draft": {"fusion": {"aux_layers": {"ids": [3]}}}}) == [("draft.fusion.aux_layers.ids",
                                                                                      [1, 2])]
