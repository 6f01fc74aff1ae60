"""Mutation run 9 (scripts/mutate.py --fork over assembler/names.py, assembler/fit.py, convert/fits.py,
convert/canonical.py and lines 20-70 of convert/rotary.py): the edges the other tests left open. names: an empty
listing's pattern. fit: the input norms, vocabulary maps and embedding a spec's draft holds, and the parts a fused
qkv_proj / gate_up_proj splits into. fits: Fit is frozen, a stand-in target's layers and heads, nothing introduced
when a side cannot be judged. canonical: a fusion's bias fact, d2t offsets, the bounds check_facts puts on the head
size, same_bits's dtype and shape, the unrecognised folder's name cut at 300. rotary: the FP8 scale block a spec
gives, verify's reordering and block scales following reordered rows. Equivalent survivors are argued in the
round's report, not pinned here."""
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from safetensors.torch import load_file

from draftsmith.assembler.fit import STACKED, held_patterns, holder, split_parts
from draftsmith.assembler.names import one_pattern
from draftsmith import limits
from draftsmith.convert.canonical import (ConvertError, check_facts, head_dim, plan_canonical, read_canonical,
                                         same_bits)
from draftsmith.convert.rotary import permute_block_scale, reorder_heads, rope_permutation, scale_block
from draftsmith.convert.fits import Fit, introduced_misfits, stand_in_target
from draftsmith.registry import default_registry
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.specs.loader import parse_spec
from draftsmith.testing import write_eagle1, write_eagle3, write_target


# --- assembler/names.py ---------------------------------------------------------------------------------------------

def test_an_empty_listing_is_an_empty_pattern():
    assert one_pattern([]) == ""
    assert one_pattern(iter([])) == ""
    assert one_pattern(["layers.0.w"]) == "'layers.0.w'"


# --- assembler/fit.py -----------------------------------------------------------------------------------------------

def eagle3_spec(**draft):
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    for key, value in draft.items():
        data["draft"][key] = {**data["draft"].get(key, {}), **value}
    return parse_spec(data, source="round 9", registry=default_registry())


def holds(spec, *names):
    say = holder(spec, default_registry())
    return {n: say(n) for n in names}


def test_input_norms_held_follow_the_specs_norms_input():
    layer0, layer1 = "layers.0.input_layernorm.weight", "layers.1.input_layernorm.weight"
    assert holds(eagle3_spec(norms={"input": "all"}), layer0, layer1) == {layer0: True, layer1: True}
    assert holds(eagle3_spec(norms={"input": "not_first"}), layer0, layer1) == {layer0: False, layer1: True}
    assert holds(eagle3_spec(norms={"input": "none"}), layer0, layer1) == {layer0: False, layer1: False}


def test_an_own_head_holds_vocabulary_maps_unless_the_spec_says_the_vocabulary_is_whole():
    maps = ("d2t", "t2d", "lm_head.weight")
    for reduced in ("auto", True):
        assert holds(eagle3_spec(vocab={"reduced": reduced}), *maps) == dict.fromkeys(maps, True)
    assert holds(eagle3_spec(vocab={"reduced": False}), *maps) == {"d2t": False, "t2d": False, "lm_head.weight": True}
    assert r"^(d2t|t2d)$" not in held_patterns(eagle3_spec(vocab={"reduced": False}), default_registry())


def test_a_fused_module_splits_into_its_parts_in_stacking_order():
    assert STACKED == {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
    every = lambda c: True  # noqa: E731
    assert split_parts("layers.3.self_attn.qkv_proj.weight", every) == (
        "layers.3.self_attn.q_proj.weight", "layers.3.self_attn.k_proj.weight", "layers.3.self_attn.v_proj.weight")
    assert split_parts("layers.0.mlp.gate_up_proj.bias", every) == ("layers.0.mlp.gate_proj.bias",
                                                                    "layers.0.mlp.up_proj.bias")
    assert split_parts("qkv_proj.weight", every) is None   # no module holds it
    assert split_parts("layers.0.self_attn.o_proj.weight", every) is None
    assert split_parts("layers.0.self_attn.qkv_proj.weight", lambda c: "k_proj" not in c) is None


def test_an_own_embedding_is_held_only_when_the_spec_does_not_share_the_targets():
    name = "embed_tokens.weight"
    assert holds(eagle3_spec(share={"embed": "target"}), name) == {name: False}
    for embed in ("own", "own_if_different"):
        assert holds(eagle3_spec(share={"embed": embed}), name) == {name: True}


# --- convert/fits.py ------------------------------------------------------------------------------------------------

def test_a_fit_is_frozen():
    judged = Fit({"fc.weight": "missing"}, [])
    with pytest.raises(dataclasses.FrozenInstanceError):
        judged.misfits = {}
    assert judged.names == {}


def test_nothing_is_introduced_when_either_side_cannot_be_judged():
    unproposed = SimpleNamespace(spec=None, folder=Path("nowhere"))   # inspect proposed no spec: no fit
    assert introduced_misfits(Fit({"fc.weight": "missing"}, []), unproposed) == []
    assert introduced_misfits(None, unproposed) == []


def test_a_stand_in_target_has_64_layers_unless_the_draft_taps_deeper():
    draft = SimpleNamespace(hidden_size=64, vocab_size=96)
    assert stand_in_target({}, draft).num_hidden_layers == 64
    assert stand_in_target({"eagle_aux_hidden_state_layer_ids": [1, 63]}, draft).num_hidden_layers == 64
    assert stand_in_target({"eagle_aux_hidden_state_layer_ids": [1, 64]}, draft).num_hidden_layers == 65
    assert stand_in_target({"target_layer_ids": [70, 2]}, draft).num_hidden_layers == 71


def test_a_stand_in_target_is_a_valid_config_for_any_even_width():
    # one head (one key/value head): a width of 66 has an even head size (rope needs one) and heads group evenly
    wide = stand_in_target({"target_hidden_size": 66, "vocab_size": 10}, SimpleNamespace(hidden_size=64, vocab_size=96))
    assert (wide.hidden_size, wide.vocab_size) == (66, 10)
    assert wide.num_attention_heads % wide.num_key_value_heads == 0


# --- convert/canonical.py -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("r9") / "target", num_hidden_layers=4)


def test_a_fusion_with_a_bias_setting_states_whether_the_checkpoint_has_one(target, tmp_path):
    with_bias = plan_canonical(write_eagle1(tmp_path / "e1", target, bias=True))   # inspected here: no `found`
    without = plan_canonical(write_eagle1(tmp_path / "e1-nobias", target, bias=False))
    assert (with_bias.facts["bias"], without.facts["bias"]) == (True, False)
    assert "bias" not in plan_canonical(write_eagle3(tmp_path / "e3", target)).facts   # eagle3's fc: no setting
    with pytest.raises(dataclasses.FrozenInstanceError):   # a plan is read, never edited
        with_bias.facts = {}


def test_offset_d2t_is_read_as_written_and_absolute_d2t_as_offsets(target, tmp_path):
    for layout in ("offset", "absolute"):
        folder = write_eagle3(tmp_path / layout, target, draft_vocab=40, d2t=layout)
        written = load_file(folder / "model.safetensors")["d2t"]
        tensors, _, _, spec = read_canonical(folder)
        shift = torch.arange(40) if layout == "absolute" else 0
        assert torch.equal(tensors["d2t"], written - shift), (layout, spec)
    tensors = read_canonical(write_eagle3(tmp_path / "whole", target))[0]   # a whole vocabulary: no d2t to shift
    assert "d2t" not in tensors


def test_same_bits_needs_the_same_dtype_and_shape_not_only_the_same_bytes():
    x = torch.tensor([1.0, float("nan"), -0.0, 2.5])
    assert same_bits(x, x.clone()) and not torch.equal(x, x.clone())
    assert not same_bits(x, x.view(torch.int32))
    assert not same_bits(x, x.reshape(2, 2))
    assert not same_bits(x, torch.tensor([1.0, float("nan"), 0.0, 2.5]))



@pytest.mark.parametrize("length", [300, 301])
def test_an_unrecognised_folder_is_named_in_at_most_300_characters(length):
    folder = "f" * length
    with pytest.raises(ConvertError, match="not a layout draftsmith recognises") as refused:
        plan_canonical(folder, SimpleNamespace(match=None))
    assert (folder in str(refused.value)) == (length == 300)
    assert "f" * 148 + "..." in str(refused.value) or length == 300

@pytest.mark.parametrize("value", [1, limits.WIDTH])
def test_a_head_dim_from_1_to_the_width_limit_is_taken(value):
    check_facts({"head_dim": value})
    assert head_dim({"head_dim": value, "hidden_size": 64, "num_attention_heads": 4}) == value


@pytest.mark.parametrize("value", [0, -8, limits.WIDTH + 1, True, 8.0, "8"])
def test_a_head_dim_that_is_no_integer_in_range_is_refused_before_reading(value):
    with pytest.raises(ConvertError, match=rf"head_dim is .*; an integer in 1\.\.{limits.WIDTH} is expected"):
        check_facts({"head_dim": value})


def test_the_head_size_is_computed_from_the_width_only_when_the_heads_divide_it():
    check_facts({"hidden_size": 64, "num_attention_heads": 4})
    assert head_dim({"hidden_size": 64, "num_attention_heads": 4}) == 16
    assert head_dim({"head_dim": None, "hidden_size": 64, "num_attention_heads": 1}) == 64
    check_facts({"head_dim": 8, "hidden_size": 66, "num_attention_heads": 4})   # a stated head_dim needs no division
    with pytest.raises(ConvertError, match=r"hidden_size \(66\) is not a multiple of num_attention_heads \(4\)"):
        check_facts({"hidden_size": 66, "num_attention_heads": 4})
    for facts in ({}, {"hidden_size": 64}, {"num_attention_heads": 4}):
        with pytest.raises(ConvertError, match="gives no head_dim"):
            check_facts(facts)
    with pytest.raises(ConvertError, match="num_attention_heads is"):
        check_facts({"hidden_size": 64, "num_attention_heads": limits.HEADS + 1})
    check_facts({"hidden_size": limits.HEADS, "num_attention_heads": limits.HEADS})



# --- convert/rotary.py (lines 20-70) --------------------------------------------------------------------------------

def test_the_scale_block_is_read_from_a_block_fp8_spec_only():
    def block(quant):
        return scale_block(SimpleNamespace(spec={"quant": quant}))
    assert block({"method": "fp8", "scheme": "block", "block": [128, 64]}) == (128, 64)
    assert block({"method": "fp8", "scheme": "block", "block": (32, 16)}) == (32, 16)
    assert block({"method": "fp8", "scheme": "channel", "block": [128, 64]}) is None
    assert block({"method": "none", "scheme": "block", "block": [128, 64]}) is None
    assert block({"method": "fp8", "scheme": "block", "block": 128}) is None
    assert block(None) is None
    assert scale_block(SimpleNamespace(spec=None)) is None and scale_block(SimpleNamespace(spec={})) is None


def test_verifys_reordering_follows_the_definition_of_the_two_pair_orders():
    d, heads = 8, 2
    rows = torch.arange(heads * d).reshape(heads * d, 1).float()
    neox = reorder_heads(rows, d, "interleaved", "neox")
    assert neox.flatten().tolist() == [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15]
    assert torch.equal(reorder_heads(neox, d, "neox", "interleaved"), rows)
    assert reorder_heads(rows, d, "neox", "neox") is rows
    for src, dst in (("interleaved", "neox"), ("neox", "interleaved")):
        perm = rope_permutation(d, src, dst)
        assert torch.equal(reorder_heads(rows, d, src, dst), rows.reshape(heads, d, 1)[:, perm].reshape(rows.shape))


def test_block_scales_follow_reordered_rows_only_where_a_block_keeps_one_scale():
    to_neox = rope_permutation(4, "interleaved", "neox")
    whole_heads = torch.tensor([[1.0, 5.0, 7.0], [2.0, 6.0, 8.0]])   # blocks of 4 rows hold whole heads of 4 rows
    assert torch.equal(permute_block_scale(whole_heads, 8, 4, to_neox, 4), whole_heads)
    split = rope_permutation(8, "interleaved", "neox")      # one head of 8 rows over two blocks of 4
    assert permute_block_scale(torch.tensor([[1.0], [2.0]]), 8, 8, split, 4) is None
    assert torch.equal(permute_block_scale(torch.tensor([[3.0], [3.0]]), 8, 8, split, 4), torch.tensor([[3.0], [3.0]]))
