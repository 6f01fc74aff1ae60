"""Mutation run 7 on draftsmith/convert/fp8.py: what inspect reads of stored scales. Mistral's weight scales without
activation scales read through the rules it adds, activation scales alone ignored and said; a quant section's modules
and its default; scale rules over every layer only where the numbers map one to one; the input width a block
activation checks, block strategy groups, module patterns, and the notes on 0-d scales and guessed blocks. The run's
hub.py tests: test_kills_round7.py."""
from pathlib import Path

import pytest
import torch

from draftsmith.convert.fp8 import fp8_reading, quantized, scale_rule


# --- fp8: what inspect reads of stored scales ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    from draftsmith.testing import write_target

    return write_target(tmp_path_factory.mktemp("r7-target"), "llama", seed=3, hidden_size=32, intermediate_size=64,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_hidden_layers=8, vocab_size=64)


def reading(folder: Path, spec_name: str, quant=None):
    """fp8_reading as inspect calls it, for the family spec ``spec_name``."""
    from draftsmith.assembler.checkpoint import list_tensors
    from draftsmith.assembler.config import read_raw_config
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec

    registry = default_registry()
    return fp8_reading(load_spec(spec_name, registry), registry, read_raw_config(folder), list_tensors(folder),
                       quant or {})


def test_mistral_weight_scales_without_activation_scales_are_read_through_the_rules_it_adds(target, tmp_path):
    """qscale_weight on every layer linear, no qscale_act: the rules that read them as weight_scale are applied (they
    were only when activation scales were ignored too), so every layer linear is proposed quantized."""
    from safetensors.torch import load_file

    from draftsmith.assembler.checkpoint import save_safetensors
    from draftsmith.components.quant import quantize
    from draftsmith.convert.inspect import inspect_checkpoint
    from draftsmith.testing.mistral import write_mistral_eagle

    draft = write_mistral_eagle(tmp_path / "m", target)
    stored = load_file(str(draft / "consolidated.safetensors"))
    for name, t in list(stored.items()):
        if name.startswith("layers.") and name.endswith(".weight") and t.dim() == 2:
            w, s = quantize(t, "tensor")
            stored |= {name: w, name.removesuffix("weight") + "qscale_weight": s}
    save_safetensors(stored, draft, "consolidated.safetensors")
    found = reading(draft, "eagle-mistral")
    # eagle-mistral's own rules read them (one per linear, every layer's): none added, every linear quantized
    assert found.rules == [] and found.ignore == []
    assert found.quant["scheme"] == "tensor" and len(found.quant["modules"]) == 7, found.quant
    spec = inspect_checkpoint(draft).spec
    assert len(spec["quant"]["modules"]) == 7 and any("feed_forward\\.w2\\.qscale_weight" in r["match"]
                                                       for r in spec["weights"]["rules"])


def test_activation_scales_alone_are_ignored_and_said_and_no_scales_at_all_read_nothing(target, tmp_path):
    """input_scale tensors without any weight scale: the proposal ignores them (with the note) and keeps its quant;
    a draft without any scale reads as None."""
    from safetensors.torch import load_file

    from draftsmith.assembler.checkpoint import save_safetensors
    from draftsmith.testing import write_eagle1

    draft = write_eagle1(tmp_path / "d", target, bias=False)
    assert reading(draft, "eagle1-llama") is None
    tensors = load_file(str(draft / "model.safetensors"))
    tensors |= {k.replace(".weight", ".input_scale"): torch.ones(1) for k, t in list(tensors.items())
                if k.startswith("layers.") and k.endswith("_proj.weight")}
    save_safetensors(tensors, draft)
    found = reading(draft, "eagle1-llama")
    assert found is not None and found.ignore == [r"\.input_scale$"] and found.quant is None and found.rules == []
    assert len(found.notes) == 1 and found.notes[0].startswith("weights.ignore: the 7 static activation scale(s) "
                                                               "(input_scale)"), found.notes


def test_a_quant_sections_modules_take_and_its_default_is_every_layer():
    linears = {"fc", "layers.0.self_attn.q_proj", "layers.1.mlp.up_proj"}
    assert quantized({"modules": [r"^fc$"]}, linears) == {"fc"}
    assert quantized({"modules": None}, linears) == {"layers.0.self_attn.q_proj", "layers.1.mlp.up_proj"}
    assert quantized({"modules": [r"^layers\."], "exclude": [r"\.mlp\."]}, linears) == {"layers.0.self_attn.q_proj"}


class Renames:
    """A rule set's to_canonical as a table (None: no canonical name)."""
    def __init__(self, table):
        self.table = table

    def to_canonical(self, name):
        return self.table.get(name), None


def test_a_scale_rule_needs_a_canonical_weight():
    assert scale_rule("layers.0.attention.wq", Renames({})) is None
    assert scale_rule("layers.0.attention.wq", Renames({"layers.0.attention.wq.weight": "layers.0.q.bias"})) is None


@pytest.mark.parametrize("module, canonical", [("layers.0.experts.0.w1", "layers.0.mlp.experts.0.gate_proj"),
                                               ("layers.0.attention.wq", "midlayer.self_attn.q_proj")])
def test_a_scale_rule_is_for_the_module_alone_where_its_numbers_do_not_map_one_to_one(module, canonical):
    """A number twice in the module (layers.0...experts.0), or one the canonical name drops (layers.0 -> midlayer):
    no pattern over every layer, the module's own name."""
    rule = scale_rule(module, Renames({f"{module}.weight": f"{canonical}.weight"}))
    escaped = module.replace(".", r"\.")
    assert rule["match"] == rf"^{escaped}\.qscale_weight$" and rule["replace"] == f"{canonical}.weight_scale"


def test_a_kind_is_named_with_its_stored_name_only_where_that_is_not_the_schemes_own():
    from draftsmith.components.quant import scale_name
    from draftsmith.convert.fp8 import kind_name

    assert kind_name("block", scale_name("block")) == "block"
    assert kind_name("tensor", scale_name("tensor")) == "tensor"
    assert kind_name("block", "weight_scale") == "block (weight_scale)" != kind_name("block", "weight_scale_inv")


def info(name: str, shape):
    from draftsmith.assembler.checkpoint import TensorInfo

    return TensorInfo(name, tuple(shape), torch.float32, Path("m.safetensors"))


@pytest.mark.parametrize("shape", [(256, 100), (4, 256, 100)])
def test_block_activation_reads_a_linears_input_width_from_its_last_axis(shape):
    """A 256 x 100 weight (or stacked [4, 256, 100]): 128 does not divide its 100 inputs, whatever its rows."""
    from draftsmith.convert.fp8 import block_activation

    act, why = block_activation([64, 128], ["fc"], {"fc.weight": info("fc.weight", shape)})
    assert act == "none"
    assert "block[1] = 128 does not divide the input width of 1 scaled linear(s), e.g. fc (100 wide)" in why
    assert block_activation([128, 4], ["fc"], {"fc.weight": info("fc.weight", shape)}) == ("dynamic", None)


def test_only_block_strategy_groups_count_as_block_groups():
    from draftsmith.convert.fp8 import config_block, weights_only

    groups = {"a": {"weights": {"strategy": "channel", "block_structure": [64, 64]}, "input_activations": None},
              "b": ["not a group"]}
    config = {"quantization_config": {"config_groups": groups}}
    assert not weights_only(config) and config_block(config, "weight_scale") == (None, "block_structure")
    groups["c"] = {"weights": {"strategy": "block", "block_structure": [32, 32]}, "input_activations": None}
    assert weights_only(config) and config_block(config, "weight_scale") == ([32, 32], "block_structure")


def test_a_module_whose_pattern_takes_an_unscaled_linear_is_named_alone():
    from draftsmith.convert.fp8 import module_patterns

    scaled = ["layers.0.mlp.up_proj", "layers.0.self_attn.q_proj"]
    linears = {*scaled, "layers.1.mlp.up_proj", "layers.1.self_attn.q_proj", "fc"}
    assert module_patterns(scaled, linears) == [r"^layers\.0\.mlp\.up_proj$", r"^layers\.0\.self_attn\.q_proj$"]
    assert module_patterns(scaled, set(scaled) | {"fc"}) == [r"^layers\.\d+\.mlp\.up_proj$",
                                                             r"^layers\.\d+\.self_attn\.q_proj$"]


@pytest.mark.parametrize("canonical", ["layers.1.self_attn.q_proj", "layers.1.attn.0.q_proj"])
def test_a_scale_rule_takes_every_layer_where_the_numbers_map_one_to_one(canonical):
    """A number of the canonical name's own (attn.0) stays as it is: the module's numbers still map one to one."""
    rule = scale_rule("layers.1.attention.wq", Renames({"layers.1.attention.wq.weight": f"{canonical}.weight"}))
    assert rule["match"] == r"^layers\.(\d+)\.attention\.wq\.qscale_weight$"
    assert rule["replace"] == canonical.replace("layers.1.", "layers.\\1.") + ".weight_scale"
    tail = canonical.split(".", 2)[2].replace(".", r"\.")
    assert rule["inverse"] == [r"^layers\.(\d+)\." + tail + r"\.weight_scale$",
                               r"layers.\1.attention.wq.qscale_weight"]


def test_a_0d_scales_note_names_the_first_of_them():
    from draftsmith.convert.fp8 import scalar_notes

    scales = {"a.weight_scale": info("a.weight_scale", ()), "b.weight_scale": info("b.weight_scale", (1,))}
    assert scalar_notes(list(scales), scales) == [
        ("quant: 1 weight_scale tensor(s) are stored 0-d (e.g. a.weight_scale); draftsmith's fp8 method loads each as "
         "the per-tensor scale [1] holding the same value")]
    assert scalar_notes(["b.weight_scale"], scales) == []


def test_a_guessed_blocks_note_says_the_sizes_the_shapes_allow_open_ended_where_they_are():
    from draftsmith.convert.fp8 import fp8_scheme

    def note(weight, scale):
        return fp8_scheme({"fc.weight": info("fc.weight", weight), "fc.weight_scale_inv": info("s", scale)}, {})[1]
    assert note((64, 64), (2, 2)) == ("quant: block 32x32 (weight_scale_inv and its shapes; a guess: the shapes "
                                      "allow block sizes 32..63 x 32..63)")
    assert note((64, 300), (2, 1)) == ("quant: block 32x512 (weight_scale_inv and its shapes; a guess: the shapes "
                                       "allow block sizes 32..63 x 300..)")
