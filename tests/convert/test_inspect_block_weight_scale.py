"""`inspect` on a draft whose linears hold FP8 block scales under compressed-tensors' name (llm-compressor's
FP8_BLOCK: ``weight_scale`` [ceil(out/b0), ceil(in/b1)], not ``weight_scale_inv``): it proposes ``scheme: block``
with ``block_scale: weight_scale`` and the block the config's config_groups ``block_structure`` states (else the
shapes show), and that spec loads the weights the float copy holds; a ``weight_scale`` per channel [out, 1] or per
tensor ([1], 0-d) stays channel / tensor (it was proposed channel, whose [out, 1] buffers no block scale fits)."""
import json
from pathlib import Path

import pytest
import torch

import draftsmith
from draftsmith.assembler.checkpoint import TensorInfo
from draftsmith.convert.fits import proposed_fit
from draftsmith.convert.fp8 import fp8_scheme
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.testing import edit_config, write_eagle1, write_eagle3, write_target
from draftsmith.testing.quant import dequantized_copy, quantize_folder, target_config

FAMILIES = {   # writer, the linears quantized, the float family that reads the dequantized copy
    "eagle1": (lambda d, t: write_eagle1(d, t, bias=False), r"^layers\.\d+\.", "eagle1-llama"),
    "eagle3": (write_eagle3, r"^midlayer\.(self_attn|mlp)\.", "eagle3-llama"),
}


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_target(tmp_path_factory.mktemp("t") / "t", "llama", num_hidden_layers=8, seed=1)


def fp8_block_draft(folder: Path, target: Path, family: str, block: tuple[int, int], config: bool) -> Path:
    """A ``family`` draft quantized as FP8_BLOCK stores it; ``config``: its config.json says so (compressed-tensors
    config_groups with block_structure, as llm-compressor writes it)."""
    write, pattern, _ = FAMILIES[family]
    draft = write(folder, target)
    done = quantize_folder(draft, pattern, scheme="block", block=block, block_scale="weight_scale")
    assert done
    if config:
        qc = target_config("block", block, [n.removesuffix(".weight") for n in done], "weight_scale")
        edit_config(draft, quantization_config=qc)
    return draft


def assert_loads_as_float_copy(found, target: Path, float_spec: str, reference: Path) -> None:
    fit = proposed_fit(found)
    assert fit is not None and fit.misfits == {}, fit
    model = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, dtype="float64")
    ref = draftsmith.assemble(float_spec, target=target, draft=reference, dtype="float64")
    for name in ("self_attn.q_proj", "self_attn.k_proj", "mlp.down_proj"):
        mine = model.draft.layers[0].get_submodule(name)
        assert mine.scale_key == "weight_scale" and mine.scheme == "block", name
        assert torch.equal(mine.weight, ref.draft.layers[0].get_submodule(name).weight), name


@pytest.mark.parametrize("family", FAMILIES)
def test_block_scales_stored_as_weight_scale_are_proposed_so_with_the_configs_block_structure(target, tmp_path,
                                                                                             family):
    """32 x 48 blocks (rows and columns differ; the shapes alone allow 32..42 x 43..63): the config's
    block_structure is taken, the stored name said, and the proposed spec loads the float copy's weights."""
    block = (32, 48)
    draft = fp8_block_draft(tmp_path / "d", target, family, block, config=True)
    reference = dequantized_copy(draft, tmp_path / "float", block=block, block_scale="weight_scale")
    found = inspect_checkpoint(draft)
    quant = found.spec["quant"]
    assert (quant["method"], quant["scheme"], quant["block"], quant["block_scale"]) == (
        "fp8", "block", list(block), "weight_scale"), quant
    assert any("quant: block 32x48 (the config's block_structure); block_scale: weight_scale" in n
               for n in found.match.assumptions), found.match.assumptions
    assert_loads_as_float_copy(found, target, FAMILIES[family][2], reference)


def test_without_a_config_the_block_is_read_from_the_weight_scale_shapes(target, tmp_path):
    """No quantization_config: the block the shapes show (32 x 32 over 64- and 128-row weights, 32..42 rows and
    32..63 columns: the smallest power of two), still under weight_scale, and it loads."""
    draft = fp8_block_draft(tmp_path / "d", target, "eagle1", (32, 32), config=False)
    reference = dequantized_copy(draft, tmp_path / "float", block=(32, 32), block_scale="weight_scale")
    found = inspect_checkpoint(draft)
    quant = found.spec["quant"]
    assert (quant["scheme"], quant["block"], quant["block_scale"]) == ("block", [32, 32], "weight_scale"), quant
    assert any(n.startswith("quant: block 32x32 (weight_scale and its shapes") for n in found.match.assumptions)
    assert_loads_as_float_copy(found, target, "eagle1-llama", reference)


def shown(shapes: dict[str, tuple[int, ...]], config: dict | None = None):
    infos = {n: TensorInfo(n, s, torch.float32, Path("m.safetensors")) for n, s in shapes.items()}
    return fp8_scheme(infos, config or {})


@pytest.mark.parametrize("scale, scheme", [((64, 1), "channel"), ((1,), "tensor"), ((), "tensor")])
def test_a_per_channel_or_per_tensor_weight_scale_stays_channel_or_tensor(scale, scheme):
    assert shown({"fc.weight": (64, 128), "fc.weight_scale": scale}) == (
        {"scheme": scheme}, f"quant.scheme: {scheme} (the stored scales: weight_scale)")


def test_a_one_block_weight_scale_is_a_block_scale_not_a_per_tensor_one():
    """[1, 1] over a 64 x 128 weight (one block holds it all): a block scale, which a tensor scheme's [1] buffer
    would not take."""
    settings, _ = shown({"fc.weight": (64, 128), "fc.weight_scale": (1, 1)})
    assert (settings["scheme"], settings["block_scale"]) == ("block", "weight_scale")


def test_block_scales_under_both_names_are_several_schemes():
    """weight_scale_inv on one linear, a block weight_scale on another: one quant section names one, so none."""
    assert shown({"a.weight": (64, 64), "a.weight_scale_inv": (2, 2),
                  "b.weight": (64, 64), "b.weight_scale": (2, 2)}) is None


def test_a_block_structure_the_shapes_refuse_is_not_taken():
    """The config says 128 x 128 over a 64 x 64 weight with 2 x 2 scales (blocks of 32..63): the shapes' guess."""
    config = {"quantization_config": target_config("block", (128, 128), ["fc"], "weight_scale")}
    settings, note = shown({"fc.weight": (64, 64), "fc.weight_scale": (2, 2)}, config)
    assert settings == {"scheme": "block", "block": [32, 32], "block_scale": "weight_scale"}
    assert "the config's" not in note


@pytest.mark.parametrize("stored, said", [("weight_scale_inv", "weight_scale"), ("weight_scale", "weight_scale_inv")])
def test_the_stored_name_replaces_the_block_scale_a_family_spec_says(target, tmp_path, stored, said):
    """A family spec saying one block_scale over a draft storing the other: the proposal's is the stored one (unsaid
    where it is FP8Params' default, weight_scale_inv), and it loads."""
    from draftsmith.convert.fp8 import fp8_reading
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec

    draft = write_eagle1(tmp_path / "d", target, bias=False)
    quantize_folder(draft, r"^layers\.\d+\.", scheme="block", block=(32, 32), block_scale=stored)
    found = inspect_checkpoint(draft)
    family = dict(found.spec["quant"]) | {"block_scale": said}
    registry = default_registry()
    reading = fp8_reading(load_spec("eagle1-llama-fp8", registry), registry, found.config, found.infos, family)
    assert reading.quant.get("block_scale", "weight_scale_inv") == stored, reading.quant
    assert ("block_scale" in reading.quant) == (stored == "weight_scale")
    spec = found.spec | {"quant": reading.quant}
    model = draftsmith.assemble(draftsmith.parse_spec(spec), target=target, dtype="float64")
    assert model.draft.layers[0].self_attn.q_proj.scale_key == stored


@pytest.mark.parametrize("inputs", ["group", None])
def test_the_activation_proposed_follows_the_configs_input_activations(target, tmp_path, inputs):
    """An eagle3 draft (a float family: inspect proposes the activation) whose compressed-tensors groups quantize
    inputs per group of block[1] gets activation dynamic; one whose groups quantize the weights only
    (input_activations null: engines compute on full-precision inputs) gets none, said."""
    block = (32, 32)
    draft = fp8_block_draft(tmp_path / "d", target, "eagle3", block, config=True)
    cfg = json.loads((draft / "config.json").read_text())
    if inputs is None:
        for group in cfg["quantization_config"]["config_groups"].values():
            group["input_activations"] = None
        (draft / "config.json").write_text(json.dumps(cfg))
    found = inspect_checkpoint(draft)
    assert found.spec["quant"]["activation"] == ("dynamic" if inputs else "none")
    said = [n for n in found.match.assumptions if "quantize the weights only (input_activations null)" in n]
    assert len(said) == (0 if inputs else 1), found.match.assumptions
