"""FP8 quantization applied to a model (draftsmith.components.quant_models), on tiny module trees built on meta: which
Linears a setting quantizes, the draft's quant method (a no-op pattern and a partial input group are SpecErrors at
their quant keys), a target quantized from its own quantization_config (a tied quantized lm_head and a partial group
refused by key), and the dtypes, shapes and row blocks the loader asks of FP8 linears."""
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from draftsmith.components.quant import FP8Params, FP8Weight, fp8_linear
from draftsmith.components.quant_models import (fp8, loadable_shapes, matching_linears, partial_groups,
                                                quantize_target, row_blocks, set_compute_dtype, stored_dtypes,
                                                weight_dtype)
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.errors import SpecError


def tree(widths: dict[str, tuple[int, int]], **attrs) -> nn.Module:
    """A module holding a meta Linear(in, out) at each dotted name, and ``attrs`` set on it."""
    root = nn.Module()
    for name, (inp, out) in widths.items():
        *path, leaf = name.split(".")
        node = root
        for part in path:
            if not hasattr(node, part):
                node.add_module(part, nn.Module())
            node = getattr(node, part)
        node.add_module(leaf, nn.Linear(inp, out, bias=False, device="meta"))
    for k, v in attrs.items():
        setattr(root, k, v)
    return root


DRAFT = {"layers.0.q_proj": (64, 64), "layers.0.down_proj": (96, 64), "fc": (128, 64), "lm_head": (64, 100)}


# catches quant_models.py:31 ... and not isinstance(sub, FP8Weight) -> and isinstance(sub, FP8Weight)
# catches quant_models.py:31 the and-chain -> or (a non-Linear or an excluded one matched)
# catches quant_models.py:32 not any(search(p, name) for p in params.exclude) -> any(...)
def test_matching_linears_are_the_unquantized_linears_a_module_pattern_finds_and_no_exclude_does():
    model = tree(DRAFT)
    params = FP8Params(modules=(r"^layers\.", "^fc$"), exclude=("down_proj",))
    assert sorted(matching_linears(model, params)) == ["fc", "layers.0.q_proj"]
    fp8_linear(model.fc, params)   # already FP8: not quantized twice
    assert sorted(matching_linears(model, params)) == ["layers.0.q_proj"]


# catches quant_models.py:59 module is None -> module is not None
# catches quant_models.py:71 not done -> done
def test_the_quant_method_quantizes_the_module_it_is_given_and_names_what_it_quantized():
    model = tree(DRAFT)
    assert fp8(FP8Params()) == []   # no module: nothing to quantize
    done = fp8(FP8Params(scheme="channel"), module=model)
    assert sorted(done) == ["layers.0.down_proj", "layers.0.q_proj"]
    assert isinstance(model.get_submodule("layers.0.q_proj"), FP8Weight) and not isinstance(model.fc, FP8Weight)


# catches quant_models.py:71 not done -> done (patterns that quantize nothing are a SpecError, not a no-op)
def test_patterns_that_quantize_no_linear_are_a_spec_error_at_quant_modules_listing_the_names():
    with pytest.raises(SpecError) as err:
        fp8(FP8Params(modules=(r"^blocks\.",)), module=tree(DRAFT))
    (problem,) = err.value.problems
    assert problem.path == "quant.modules" and "'layers.0.q_proj'" in problem.allowed
    assert "quant.exclude" not in problem.message
    with pytest.raises(SpecError, match="quant.exclude"):
        fp8(FP8Params(exclude=("proj",)), module=tree(DRAFT))


# catches quant_models.py:46 params.scheme != 'block' -> == 'block'
# catches quant_models.py:46 ... or params.activation != 'dynamic' -> and
# catches quant_models.py:46 params.activation != 'dynamic' -> == 'dynamic'
def test_only_dynamic_block_inputs_are_checked_for_partial_groups():
    linears = dict(tree(DRAFT).named_modules())
    linears = {n: m for n, m in linears.items() if isinstance(m, nn.Linear)}
    assert partial_groups(linears, FP8Params(scheme="block", block=(32, 48), activation="dynamic")) == {
        "layers.0.q_proj": 64, "fc": 128, "lm_head": 64}
    for params in (FP8Params(scheme="block", block=(32, 48), activation="none"),
                   FP8Params(scheme="block", block=(32, 48), activation="static"),
                   FP8Params(scheme="channel", activation="dynamic"),
                   FP8Params(scheme="tensor", activation="dynamic")):
        assert partial_groups(linears, params) == {}, params


# catches quant_models.py:48 sub.in_features % params.block[1] -> // (96 holds two whole groups of 48; 32 none)
# catches quant_models.py:48 params.block[1] -> params.block[0] (a group is block[1] columns, not block[0] rows)
def test_a_partial_group_is_an_input_width_block_columns_do_not_divide():
    linears = {"a": nn.Linear(96, 8, device="meta"), "b": nn.Linear(32, 8, device="meta"),
               "c": nn.Linear(64, 8, device="meta")}
    assert partial_groups(linears, FP8Params(scheme="block", block=(32, 48), activation="dynamic")) == {
        "b": 32, "c": 64}
    assert partial_groups(linears, FP8Params(scheme="block", block=(48, 32), activation="dynamic")) == {}


# catches quant_models.py:66 params.block[1] -> params.block[0] (the group size the message names)
def test_a_draft_with_partial_groups_is_a_spec_error_at_quant_block_naming_group_and_widths():
    model = tree(DRAFT)
    with pytest.raises(SpecError) as err:
        fp8(FP8Params(block=(32, 48), activation="dynamic"), module=model)
    (problem,) = err.value.problems
    assert problem.path == "quant.block" and problem.found == [32, 48]
    assert "groups of block[1] = 48 channels" in problem.message
    assert "1 linear(s) would end in one: layers.0.q_proj (64 wide)" in problem.message
    assert problem.allowed == "a block[1] dividing 32 (every quantized linear's input width)"   # gcd(64, 96)
    assert not any(isinstance(m, FP8Weight) for m in model.modules())   # refused before anything is quantized


# catches quant_models.py:114 w is None -> w is not None
def test_weight_dtype_reads_the_dtype_without_dequantizing_and_none_without_a_weight():
    assert weight_dtype(nn.Linear(2, 2, dtype=torch.float16, device="meta")) == torch.float16
    assert weight_dtype(nn.ReLU()) is None
    head = fp8_linear(nn.Linear(16, 16, device="meta"), FP8Params(scheme="tensor"), torch.bfloat16)
    assert weight_dtype(head) == torch.bfloat16
    set_compute_dtype(nn.Sequential(head), torch.float16)
    assert weight_dtype(head) == torch.float16


def test_loader_facts_are_keyed_by_canonical_name():
    model = tree(DRAFT)
    fp8(FP8Params(block=(32, 64)), module=model)
    dtypes = stored_dtypes(model)
    assert dtypes["layers.0.q_proj.weight"] == torch.float8_e4m3fn
    assert dtypes["layers.0.q_proj.weight_scale_inv"] == torch.float32 and "fc.weight" not in dtypes
    assert set(loadable_shapes(model)) <= set(dtypes)
    assert row_blocks(model)["layers.0.down_proj.weight_scale_inv"] == 32
    lone = fp8_linear(nn.Linear(16, 16, device="meta"), FP8Params(scheme="channel"))
    assert set(stored_dtypes(lone)) == {"weight", "weight_scale"}   # the module itself: local names


def ct_args(strategy, dynamic, **extra):
    return {"dynamic": dynamic, "group_size": None, "num_bits": 8, "strategy": strategy, "symmetric": True,
            "type": "float", **extra}


def ct_config(weights, inputs, *, ignore=("lm_head",)):
    """A compressed-tensors quantization_config as llm-compressor writes it (targets Linear)."""
    group = {"format": "float-quantized", "input_activations": inputs, "output_activations": None,
             "targets": ["Linear"], "weights": weights}
    return {"config_groups": {"group_0": group}, "format": "float-quantized", "ignore": list(ignore),
            "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed",
            "sparsity_config": {}, "transform_config": {}}


TARGET = {"model.layers.0.self_attn.q_proj": (64, 64), "model.layers.0.mlp.down_proj": (96, 64),
          "lm_head": (64, 100)}
HEAD_TOO = ct_config(ct_args("channel", False), ct_args("token", True), ignore=[])


# catches quant_models.py:135 params is None -> params is not None
def test_a_target_without_quantization_config_is_left_float():
    model = tree(TARGET, tie=False)
    assert quantize_target(model, SimpleNamespace(quantization_config=None)) == []
    assert quantize_target(model, SimpleNamespace()) == []
    assert not any(isinstance(m, FP8Weight) for m in model.modules())


# catches quant_models.py:135 params is None -> params is not None (a quantized target is quantized)
# catches quant_models.py:144 getattr(model, 'tie', False) -> getattr(model, 'tie', True)
# catches quant_models.py:144 ... and 'lm_head' in linears -> or
def test_an_untied_target_quantizes_its_lm_head_when_its_config_says_so():
    done = quantize_target(tree(TARGET, tie=False), SimpleNamespace(quantization_config=HEAD_TOO))
    assert sorted(done) == sorted(TARGET)
    bare = tree(TARGET)   # a model without a tie attribute is not tied
    assert "lm_head" in quantize_target(bare, SimpleNamespace(quantization_config=HEAD_TOO))


# catches quant_models.py:144 'lm_head' in linears -> not in
def test_a_tied_target_is_refused_only_when_its_config_quantizes_lm_head():
    with pytest.raises(UnsupportedTarget, match="tie_word_embeddings true: lm_head is quantized"):
        quantize_target(tree(TARGET, tie=True), SimpleNamespace(quantization_config=HEAD_TOO))
    no_head = ct_config(ct_args("channel", False), ct_args("token", True))
    done = quantize_target(tree(TARGET, tie=True), SimpleNamespace(quantization_config=no_head))
    assert sorted(done) == ["model.layers.0.mlp.down_proj", "model.layers.0.self_attn.q_proj"]


# catches quant_models.py:147 params.block_scale == 'weight_scale_inv' -> != (each style's own key is named)
# catches quant_models.py:151 params.block[1] -> params.block[0] (the group size named)
def test_a_target_with_partial_input_groups_is_refused_by_its_own_styles_key():
    fine = {"quant_method": "fp8", "weight_block_size": [32, 48], "activation_scheme": "dynamic"}
    with pytest.raises(UnsupportedTarget) as err:
        quantize_target(tree(TARGET, tie=False), SimpleNamespace(quantization_config=fine))
    text = str(err.value)
    assert "weight_block_size=[32, 48] is not supported with activation_scheme dynamic" in text, text
    assert "groups of 48 channels, a partial group in 1 linear(s): model.layers.0.self_attn.q_proj (64 wide)" \
        in text, text
    block = ct_config(ct_args("block", False, block_structure=[32, 48]), ct_args("group", True, group_size=48))
    with pytest.raises(UnsupportedTarget) as err:
        quantize_target(tree(TARGET, tie=False), SimpleNamespace(quantization_config=block))
    assert "block_structure=[32, 48] is not supported with dynamic group inputs" in str(err.value), str(err.value)


# catches quant_models.py:52 short_list(..., 4, 200) -> short_list(..., 5, 200) and -> 3
def test_partial_group_linears_are_named_four_and_the_rest_counted():
    """A bounded message: a target of many layers names a few of its linears and counts the others."""
    wide = {f"model.layers.{i}.q_proj": (64, 64) for i in range(6)}
    fine = {"quant_method": "fp8", "weight_block_size": [32, 48], "activation_scheme": "dynamic"}
    with pytest.raises(UnsupportedTarget) as err:
        quantize_target(tree(wide, tie=False), SimpleNamespace(quantization_config=fine))
    named = ", ".join(f"model.layers.{i}.q_proj (64 wide)" for i in range(4))
    assert f"a partial group in 6 linear(s): {named} and 2 more (" in str(err.value), str(err.value)


# catches quant_models.py:77 short_list(linears, 12, 120) -> short_list(linears, 13, 120) and -> 11
def test_a_no_op_pattern_lists_twelve_of_the_drafts_linears_and_counts_the_rest():
    names = {f"layers.{i:02}.proj": (16, 16) for i in range(13)}
    with pytest.raises(SpecError) as err:
        fp8(FP8Params(modules=("^nothing$",)), module=tree(names))
    allowed = err.value.problems[0].allowed
    assert allowed.endswith("'layers.11.proj' and 1 more") and "'layers.12.proj'" not in allowed, allowed
