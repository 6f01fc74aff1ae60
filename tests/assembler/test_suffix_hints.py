"""A leftover whose module is the missing one's short name (``mlp.gate`` for ``mlp.gate_proj``, a foreign layout's
names) is a sure hint: gate and up, both [I, H], were hinted nothing (each leftover was among the two closest to the
other missing name), so a user renaming three MLP tensors was told of one (down, alone in its shape)."""
from test_hints_one_to_one import hints

from draftsmith.assembler.names import affixed


def test_gate_and_up_under_short_names_are_each_hinted():
    missing = ["layers.0.mlp.gate_proj.weight", "layers.0.mlp.up_proj.weight"]
    assert hints(["layers.0.mlp.gate.weight", "layers.0.mlp.up.weight"], missing, shape=(128, 64)) == {
        "layers.0.mlp.gate_proj.weight": "layers.0.mlp.gate.weight",
        "layers.0.mlp.up_proj.weight": "layers.0.mlp.up.weight"}


def test_a_short_name_two_missing_names_extend_is_no_hint():
    missing = ["layers.0.mlp.gate_proj.weight", "layers.0.mlp.gate_up_proj.weight"]
    assert hints(["layers.0.mlp.gate.weight"], missing, shape=(128, 64)) == dict.fromkeys(missing)


def test_affixed_is_a_suffix_at_a_word_boundary_of_the_same_kind():
    assert affixed("a.mlp.gate_proj.weight", "b.mlp.gate.weight")
    assert affixed("a.gate.weight", "a.gate_proj.weight")
    assert not affixed("a.gate_proj.weight", "a.gate.bias")            # another kind
    assert not affixed("a.gateway.weight", "a.gate.weight")            # not at a word boundary
    assert not affixed("a.post_attention_layernorm.weight", "a.attention_norm.weight")
    assert not affixed("a.gate.weight", "a.gate.weight")               # the same name: no suffix
