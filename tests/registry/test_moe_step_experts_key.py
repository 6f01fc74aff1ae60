"""A data-only target record of another moe_kind than sparse whose layers are MoE every moe_step-th layer: its rule
asks the config for an experts count, and read it under MoEParams' default key (num_experts) whatever the record
said, and moe_keys left that key off (inspect called it unread). TargetArch.moe_experts names the key (a review,
h108); its default stays the moe params' experts_key."""
from types import SimpleNamespace

from draftsmith.components.targets import TARGETS, TargetArch

OTHER = {"moe_kind": "mine", "moe": (("factor", 2.0),), "moe_step": "decoder_sparse_step"}


def cfg(**keys):
    return SimpleNamespace(**{"num_hidden_layers": 4, "decoder_sparse_step": 2} | keys)


def test_a_records_experts_count_key_decides_its_moe_layers_and_is_read():
    record = TargetArch(**OTHER, moe_experts="n_routed_experts")
    assert record.moe_layers(cfg(n_routed_experts=8)) == [1, 3]
    assert record.moe_layers(cfg(num_experts=8)) == []   # not its key: no experts, no MoE layer
    assert record.moe_keys() == {"decoder_sparse_step", "n_routed_experts"}


def test_without_it_the_moe_params_key_is_read_and_said_read():
    record = TargetArch(**OTHER)
    assert record.moe_layers(cfg(num_experts=8)) == [1, 3] and record.moe_layers(cfg()) == []
    assert record.moe_keys() == {"decoder_sparse_step", "num_experts"}
    assert TargetArch(moe_kind="mine", moe=(("factor", 2.0),)).moe_keys() == set()   # no layer rule reads it
    qwen = TARGETS["qwen3_moe"]()   # sparse: its moe's experts_key, as before
    assert qwen.experts_key() == "num_experts" and "num_experts" in qwen.moe_keys()
    assert qwen.moe_layers(cfg(num_experts=8, decoder_sparse_step=1)) == [0, 1, 2, 3]
