"""The fallbacks DESIGN.md names, one test each: MLA keys, v1/v2 choice, aux-layer count, hc_mult, and the tap
layers of invariant 25."""
import logging

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers import LlamaConfig, LlavaConfig

import draftsmith
from draftsmith.assembler.build import attention_name
from draftsmith.assembler.config import (MLA_KEYS, clean_mla_keys, draft_hf_config, flatten_draft_config, is_mla,
                                         target_hidden_width)
from draftsmith.assembler.taps import aux_count, default_taps, resolve_taps
from draftsmith.decoding.modes import choose_mode

# --- MLA keys ---------------------------------------------------------------------------------------------------

mla_values = st.dictionaries(st.sampled_from(MLA_KEYS), st.none() | st.integers(1, 512))
other_values = st.dictionaries(st.sampled_from(["hidden_size", "rope_scaling", "head_dim", "bias"]),
                               st.none() | st.integers(1, 64))


@given(mla=mla_values, other=other_values)
def test_null_mla_keys_are_removed_and_nothing_else(mla, other):
    cfg = {**other, **mla}
    cleaned = clean_mla_keys(cfg)
    assert cleaned == {k: v for k, v in cfg.items() if not (k in MLA_KEYS and v is None)}
    assert all(cleaned[k] is not None for k in MLA_KEYS if k in cleaned)
    assert is_mla(cfg) == is_mla(cleaned) == any(v is not None for v in mla.values())


def test_a_config_with_no_mla_fields_is_gqa(registry, base):
    spec = draftsmith.parse_spec(base, registry=registry)                    # attention: {kind: gqa}
    base["draft"]["attention"] = {"kind": "auto"}
    auto = draftsmith.parse_spec(base, registry=registry)
    plain = {"hidden_size": 64, "num_attention_heads": 4}
    nulls = {**plain, **dict.fromkeys(MLA_KEYS)}
    assert not is_mla(plain) and not is_mla(nulls)
    assert attention_name(auto, plain) == attention_name(auto, nulls) == "gqa"
    assert attention_name(auto, {**nulls, "kv_lora_rank": 512}) == "mla"
    assert attention_name(spec, {**nulls, "kv_lora_rank": 512}) == "gqa"  # an explicit kind is obeyed


def test_speculators_config_is_flattened_and_cleaned():
    raw = {"architectures": ["Eagle3Speculator"], "draft_vocab_size": 32,
           "transformer_layer_config": {"hidden_size": 64, "num_attention_heads": 4, "draft_vocab_size": 99,
                                        "q_lora_rank": None, "kv_lora_rank": None, "v_head_dim": None}}
    flat = flatten_draft_config(raw)
    assert flat["hidden_size"] == 64 and flat["draft_vocab_size"] == 32  # the outer keys win
    assert not set(MLA_KEYS) & set(flat) and "transformer_layer_config" not in flat
    hf = draft_hf_config(raw)
    assert hf.hidden_size == 64 and getattr(hf, "kv_lora_rank", None) is None


# --- v1 / v2 ----------------------------------------------------------------------------------------------------

@given(topk=st.integers(1, 8), steps=st.integers(1, 8), page=st.integers(1, 4), recurrent=st.booleans())
def test_auto_picks_v2_only_for_trees_on_page_1_without_recurrent_layers(topk, steps, page, recurrent):
    n = topk + 1
    plan = choose_mode("auto", topk, steps, n, page, recurrent)
    if topk > 1 and page == 1 and not recurrent:
        assert (plan.mode, plan.topk, plan.draft_tokens) == ("v2", topk, n)
        return
    assert (plan.mode, plan.topk, plan.steps, plan.draft_tokens) == ("v1", 1, steps, steps + 1)
    assert plan.reason.startswith("auto chose v1")
    assert ("topk is 1" in plan.reason) == (topk == 1)
    assert (f"page_size is {page}" in plan.reason) == (page != 1)
    assert ("recurrent" in plan.reason) == recurrent


@given(topk=st.integers(1, 8), page=st.integers(1, 4), recurrent=st.booleans())
def test_explicit_v2_in_an_unsupported_combination_raises(topk, page, recurrent):
    if topk > 1 and page == 1 and not recurrent:
        assert choose_mode("v2", topk, 3, topk + 1, page, recurrent).mode == "v2"
    else:
        with pytest.raises(ValueError, match="v2 is unsupported"):
            choose_mode("v2", topk, 3, topk + 1, page, recurrent)


def test_explicit_v1_is_a_chain_even_when_v2_would_fit():
    plan = choose_mode("v1", 4, 5, 8, 1, False)
    assert (plan.mode, plan.topk, plan.draft_tokens, plan.reason) == ("v1", 1, 6, "mode v1 requested")


def test_auto_falling_back_to_v1_logs_why(caplog):
    with caplog.at_level(logging.INFO, logger="draftsmith"):
        choose_mode("auto", 4, 5, 8, 16, False)
    assert "page_size is 16" in caplog.text


# --- aux-layer count and taps -----------------------------------------------------------------------------------

def eagle3_params(registry, **fusion):
    return registry.get("fusion", "eagle3").params.model_validate({"norm_before_residual": False, **fusion})


@pytest.mark.parametrize("fusion, cfg, count", [
    ({"num_aux": 2}, {"num_aux_hidden_states": 4, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}, 2),
    ({}, {"num_aux_hidden_states": 4, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}, 4),
    ({"aux_layers": {"ids": [1, 5]}}, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4, 5]}}, 2),
    ({}, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4, 5]}}, 5),
    ({}, {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}, 4),     # speculators: the key at top level
    ({}, {}, 3),
])
def test_aux_count_explicit_then_config_ids_then_3(registry, fusion, cfg, count):
    assert aux_count(eagle3_params(registry, **fusion), cfg) == count


@pytest.mark.parametrize("fusion, cfg, taps", [
    ({}, {}, (2, 16, 29)),                                                        # [2, L//2, L-3]
    ({}, {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}, (1, 15, 28)),        # speculators, top level
    ({}, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [3, 9]}}, (3, 9)),
    ({"aux_layers": {"ids": [1, 23, 30]}}, {"eagle_aux_hidden_state_layer_ids": [3, 9]}, (1, 23, 30)),
    ({"aux_layers": {"ids": [1, 23, 30], "at": "output"}}, {}, (2, 24, 31)),    # SGLang: output of id = input id+1
])
def test_taps_spec_ids_then_config_ids_then_default(registry, fusion, cfg, taps):
    assert resolve_taps(eagle3_params(registry, **fusion), cfg, 32) == taps


def test_a_count_that_disagrees_with_the_ids_is_refused(registry):
    with pytest.raises(draftsmith.SpecError, match="4 aux states asked for"):
        resolve_taps(eagle3_params(registry, num_aux=4), {}, 32)


def test_out_of_range_ids_are_refused(registry):
    with pytest.raises(draftsmith.SpecError, match=r"tap layers \[40\].*outside"):
        resolve_taps(eagle3_params(registry, aux_layers={"ids": [1, 2, 40]}), {}, 32)


# --- invariant 25: tap layers are distinct ------------------------------------------------------------------------

def build_fusion(registry, params, target_layers, draft_config=None, target_width=16):
    comp = registry.get("fusion", "eagle3")
    with torch.device("meta"):
        return comp.factory(params, hidden=16, target_width=target_width, draft_config=draft_config or {},
                            target_layers=target_layers)


@given(L=st.integers(1, 64))
def test_default_taps_are_refused_exactly_when_they_collide_or_leave_the_target(L):
    registry = draftsmith.build_registry(entry_points=False)
    taps = [2, L // 2, L - 3]
    bad = len(set(taps)) < 3 or min(taps) < 0 or max(taps) >= L
    if not bad:
        fc = build_fusion(registry, eagle3_params(registry), L)
        assert fc.taps == tuple(sorted(taps)) and fc.in_features == 3 * 16
        return
    with pytest.raises(draftsmith.SpecError) as info:
        build_fusion(registry, eagle3_params(registry), L)
    text = str(info.value)
    assert "draft.fusion.aux_layers" in text and f"{L}-layer target" in text
    assert ("taps must be distinct" in text) == (len(set(taps)) < 3)
    assert ("the default needs at least 7" in text) == (len(set(taps)) < 3)
    assert ("outside" in text) == (min(taps) < 0)


@given(L=st.integers(4, 64), data=st.data())
def test_explicit_ids_that_collide_are_refused(L, data):
    registry = draftsmith.build_registry(entry_points=False)
    ids = data.draw(st.lists(st.integers(0, L - 2), min_size=1, max_size=5))
    at = data.draw(st.sampled_from(["input", "output"]))
    distinct = len(set(ids)) == len(ids)
    spec_ids = {"aux_layers": {"ids": ids, "at": at}}
    if not distinct:  # ids in the spec itself are refused by the params check, before any target is seen
        with pytest.raises(ValueError, match="taps must be distinct"):
            eagle3_params(registry, **spec_ids)
    cases = [(eagle3_params(registry, **spec_ids), {})] if distinct else []
    cases.append((eagle3_params(registry), {"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}))
    for params, cfg in cases:
        if distinct:
            fc = build_fusion(registry, params, L, cfg)
            shift = 1 if at == "output" and cfg == {} else 0
            assert fc.taps == tuple(sorted(i + shift for i in ids)) and fc.in_features == len(ids) * 16
        else:
            with pytest.raises(draftsmith.SpecError, match="taps must be distinct") as info:
                build_fusion(registry, params, L, cfg)
            twice = sorted({i for i in ids if ids.count(i) > 1})
            assert f"names layer(s) {twice} more than once" in str(info.value)
            # the config's ids: no advice about the default's depth, which did not choose them
            (p,) = info.value.problems
            assert p.hint == "Give distinct aux_layers.ids in the spec (is the draft made for a target of this depth?)."


def test_default_taps_helper():
    assert default_taps(32) == [2, 16, 29] and default_taps(12) == [2, 6, 9]


# --- hidden width multiplier --------------------------------------------------------------------------------------

@pytest.mark.parametrize("mult, width", [(None, 32), (1, 32), (4, 128)])
def test_target_hidden_width_uses_hc_mult_above_1(mult, width, registry):
    cfg = LlamaConfig(hidden_size=32, num_attention_heads=4, **({} if mult is None else {"hc_mult": mult}))
    assert target_hidden_width(cfg) == width
    fc = build_fusion(registry, eagle3_params(registry), 32, target_width=target_hidden_width(cfg))
    assert fc.in_features == 3 * width


def test_hc_mult_is_read_from_the_text_config():
    cfg = LlavaConfig(text_config={"model_type": "llama", "hidden_size": 48, "num_attention_heads": 4,
                                   "hc_mult": 2})
    assert target_hidden_width(cfg) == 96


@pytest.mark.parametrize("fusion, cfg, want", [
    ({"norm_before_residual": "auto"}, {},                                                  # stated by nobody
     dict(fc_norm=False, norm_before_fc=False, norm_before_residual=False)),
    ({}, {"norm_before_fc": True}, dict(fc_norm=False, norm_before_fc=True, norm_before_residual=False)),
    ({"norm_before_fc": False}, {"norm_before_fc": True}, dict(norm_before_fc=False)),          # the spec wins
])
def test_eagle3_flags_spec_then_config_then_false(registry, fusion, cfg, want):
    from draftsmith.components.eagle3_config import resolve_eagle3

    params = eagle3_params(registry, **fusion)             # the helper states norm_before_residual: false
    facts = resolve_eagle3(params, cfg, 32)
    assert {name: getattr(facts, name) for name in want} == want
    stated = {name for name in want if getattr(params, name) is not None or name in cfg}
    for name in set(want) - stated:
        assert f"{name}: stated by neither the spec nor the draft config; using the default false" in facts.notes


def test_eagle3_norm_output_notes_say_which_reading_won(registry):
    from draftsmith.components.eagle3_config import resolve_eagle3

    disagree = resolve_eagle3(eagle3_params(registry, norm_output="feed_back"), {"norm_output": True}, 32)
    assert disagree.norm_output == "feed_back"
    assert any(n.startswith("norm_output: the spec says feed_back, the draft config's norm_output=true means head")
               for n in disagree.notes)
    agree = resolve_eagle3(eagle3_params(registry, norm_output="head"), {"norm_output": True}, 32)
    assert agree.norm_output == "head" and not any(n.startswith("norm_output") for n in agree.notes)
    # SpecForge's meaning of norm_output: true, said when an EAGLE 3.1 reading (fc_norm) makes it doubtful
    for cfg, doubtful in (({"norm_output": True, "fc_norm": True}, True), ({"norm_output": True}, False),
                          ({"norm_output": True, "fc_norm": True, "speculators_model_type": "eagle3"}, False)):
        facts = resolve_eagle3(eagle3_params(registry), cfg, 32)
        said = any("read in SpecForge's meaning" in n for n in facts.notes)
        assert said == doubtful, cfg


def test_inspect_lines_say_where_each_flag_came_from(registry):
    from draftsmith.components.eagle3_config import describe_facts

    facts, lines = describe_facts(eagle3_params(registry, fc_norm=True), {"norm_before_fc": False})
    assert facts["fc_norm"] is True and facts["norm_before_fc"] is False
    assert "fc_norm: true (the spec)" in lines and "norm_before_fc: false (the draft config)" in lines
    assert "norm_before_residual: false (the spec; the weights cannot show it)" in lines


def test_taps_listed_out_of_order_are_concatenated_in_layer_order_as_the_engines_do():
    # SGLang, vLLM and the EAGLE reference collect aux states in the layer loop, whatever order a config lists them
    # in; joined as listed, [5, 4, 2] fed the fusion permuted blocks (lossless, but acceptance fell silently)
    registry = draftsmith.build_registry(entry_points=False)
    listed = build_fusion(registry, eagle3_params(registry), 8, {"eagle_aux_hidden_state_layer_ids": [5, 4, 2]})
    spec = build_fusion(registry, eagle3_params(registry, aux_layers={"ids": [5, 1, 3], "at": "output"}), 8)
    assert listed.taps == (2, 4, 5) and spec.taps == (2, 4, 6)


def test_a_tap_past_the_target_is_named_as_written_with_the_range_of_its_convention():
    registry = draftsmith.build_registry(entry_points=False)
    with pytest.raises(draftsmith.SpecError) as out:
        build_fusion(registry, eagle3_params(registry, aux_layers={"ids": [1, 3, 8], "at": "output"}), 8)
    assert "tap layers [8] (from the spec, at output)" in str(out.value)   # was [9], the layer input it means
    assert "allowed: -1..7 (layer outputs; -1: the embedding's)" in str(out.value)
    with pytest.raises(draftsmith.SpecError) as inp:
        build_fusion(registry, eagle3_params(registry, aux_layers={"ids": [1, 3, 9], "at": "input"}), 8)
    assert "tap layers [9]" in str(inp.value) and "allowed: 0..8 (layer inputs; 8: the last layer's output)" in str(
        inp.value)
