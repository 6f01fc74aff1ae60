"""FP8 targets with block scales: FineGrainedFP8 (Qwen3-*-FP8, DeepSeek-V3: 128 x 128 ``weight_scale_inv``,
dynamic inputs) and llm-compressor's FP8_BLOCK (the same blocks, or 128 x 64, stored as bf16 ``weight_scale``).
Each loads bit for bit, computes the logits of a reference quantizing inputs per token and group of block[1]
channels (transformers' Llama on the dequantized weights), and decodes greedily as target-only; a target whose
inputs would end in a partial group is refused by key before any tensor is read."""
import json

import pytest
import torch
from safetensors.torch import load_file

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.components.quant_models import target_params
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.testing import edit_config, write_eagle1, write_target
from draftsmith.testing.quant import dequantized_copy, group_fake_quant, quantize_folder

from fp8_cases import BLOCK_INPUTS, BLOCK_WEIGHTS, LAYERS, MODULES, assemble, bits, ct_args, ct_config, fp8_modules
from test_fp8_targets import root  # noqa: F401  (the module's fixture: a folder to write in, its float draft)


# FineGrainedFP8 (Qwen3-*-FP8, DeepSeek-V3): 128 x 128 block scales weight_scale_inv, dynamic inputs quantized per
# token and group of 128 channels; every quantized input is 128 or 256 wide, as the engines require
FINEGRAINED = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128], "fmt": "e4m3"}


@pytest.fixture(scope="module")
def finegrained(root):  # noqa: F811 (the fixture imported above)
    """A Llama 128 wide (MLP 256) stored as transformers' FineGrainedFP8 and Qwen3-FP8 store theirs, its float copy
    (each weight times its block's scale) and an EAGLE-1 draft for it."""
    folder = write_target(root / "finegrained", "llama", num_hidden_layers=LAYERS, seed=1, hidden_size=128,
                          intermediate_size=256)
    draft = write_eagle1(root / "finegrained-draft", folder, bias=False)
    assert len(quantize_folder(folder, r"^model\.layers\.\d+\.", scheme="block", quantization_config=True)) == 28
    dequantized_copy(folder, root / "finegrained-float", scheme="block")
    assert json.loads((folder / "config.json").read_text())["quantization_config"] == FINEGRAINED
    return folder, draft


def grouped_reference_logits(folder, ids, quantize_inputs=True, group=128):
    """transformers' Llama on the dequantized weights, each quantized linear's input fake-quantized per group."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder.parent / f"{folder.name}-float", dtype=torch.float32)
    for name in MODULES if quantize_inputs else ():
        model.get_submodule(name).register_forward_pre_hook(lambda _, args: (group_fake_quant(args[0], group),))
    with torch.no_grad():
        return model(ids).logits


def test_a_finegrained_fp8_target_loads_bit_for_bit_with_dynamic_block_inputs(finegrained):
    """Every layer linear holds the stored e4m3 values and the [ceil(out/128), ceil(in/128)] float32
    weight_scale_inv; each quantizes its inputs per group of 128 channels (no native block product: cuBLAS's needs
    input widths of whole 512 columns, tests/components/test_fp8_kernels.py)."""
    folder, draft = finegrained
    model = assemble(folder, draft)
    ckpt = load_file(str(folder / "model.safetensors"))
    assert fp8_modules(model.target) == set(MODULES)
    state = model.target.state_dict()
    assert state.keys() == ckpt.keys()
    for k, v in ckpt.items():
        assert state[k].dtype == v.dtype and torch.equal(bits(state[k]), bits(v)), k
    assert state["model.layers.0.mlp.down_proj.weight_scale_inv"].shape == (1, 2)
    assert state["model.layers.0.mlp.up_proj.weight_scale_inv"].shape == (2, 1)
    for name in MODULES:
        lin = model.target.get_submodule(name)
        assert (lin.scheme, lin.block, lin.activation, lin.native) == ("block", (128, 128), "dynamic", False)
    assert model.target.dims.config.quantization_config == FINEGRAINED


def test_a_finegrained_fp8_target_computes_the_logits_of_a_reference_quantizing_inputs_per_group(finegrained):
    """float32 logits to 1e-4 of transformers' on the dequantized weights with every quantized linear's input
    fake-quantized per token and group of 128 (what DeepSeek-V3's fp8 gemm, vLLM, SGLang and transformers' kernel
    take); the group quantization moves them well past that (it is not a no-op)."""
    folder, draft = finegrained
    model = assemble(folder, draft)
    ids = torch.tensor([[5, 17, 3, 88, 41, 9, 60, 2]])
    with torch.no_grad():
        got = model.target.logits(model.target(ids, torch.arange(ids.shape[1])[None])[0])
    want = grouped_reference_logits(folder, ids)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    assert (grouped_reference_logits(folder, ids, quantize_inputs=False) - want).abs().max() > 1e-3


def test_speculative_greedy_on_a_finegrained_fp8_target_equals_its_target_only_greedy(finegrained):
    model = assemble(*finegrained)
    for kw in ({"topk": 2, "steps": 3, "draft_tokens": 6}, {"topk": 1, "steps": 4, "draft_tokens": 5}):
        out = model.generate([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[], **kw)
        base = model.generate_baseline([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[])
        assert [o.token_ids for o in out] == [b.token_ids for b in base]


def test_a_finegrained_target_with_partial_input_groups_is_refused_before_any_tensor_is_read(
        root, tmp_path, no_tensor_reads):  # noqa: F811 (the fixture imported above)
    """128-column blocks on a Llama 64 wide: its inputs would end in a partial group, which DeepSeek-V3's act_quant
    and vLLM's and SGLang's per_token_group_quant_fp8 assert against; refused by key, naming the linears."""
    folder = write_target(tmp_path / "narrow", "llama", num_hidden_layers=2, seed=1)
    quantize_folder(folder, r"^model\.layers\.\d+\.", scheme="block", quantization_config=True)

    no_tensor_reads()
    with pytest.raises(UnsupportedTarget) as err:
        assemble(folder, root / "draft")
    text = str(err.value)
    assert "weight_block_size=[128, 128] is not supported with activation_scheme dynamic" in text, text
    assert "in groups of 128 channels, a partial group in 12 linear(s): model.layers.0.self_attn.q_proj (64 wide)" \
        in text and "allowed: " in text, text


# llm-compressor's FP8_BLOCK (compressed-tensors 0.20: QuantizationStrategy.BLOCK, block_structure [128, 128]):
# weight_scale [ceil(out/128), ceil(in/128)] in the model's dtype, inputs dynamic in groups of 128 channels; and
# 128 x 64 blocks (inputs in groups of 64: block_structure[1], not [0])
FP8_BLOCK = ct_config(BLOCK_WEIGHTS, BLOCK_INPUTS)
FP8_BLOCKS = {(128, 128): FP8_BLOCK, (128, 64): ct_config(ct_args("block", False, block_structure=[128, 64]),
                                                          ct_args("group", True, group_size=64))}


@pytest.fixture(scope="module", params=list(FP8_BLOCKS), ids=lambda b: f"{b[0]}x{b[1]}")
def fp8_block(root, request):  # noqa: F811 (the fixture imported above)
    """The finegrained Llama stored as llm-compressor's FP8_BLOCK stores it (bf16 block weight_scale), its float
    copy and an EAGLE-1 draft for it; its block."""
    block = request.param
    folder = write_target(root / f"fp8-block-{block[1]}", "llama", num_hidden_layers=LAYERS, seed=1,
                          hidden_size=128, intermediate_size=256)
    draft = write_eagle1(root / f"fp8-block-{block[1]}-draft", folder, bias=False)
    assert len(quantize_folder(folder, r"^model\.layers\.\d+\.", block=block, block_scale="weight_scale")) == 28
    tensors = load_file(str(folder / "model.safetensors"))
    save_safetensors({k: v.to(torch.bfloat16) if k.endswith("_scale") else v for k, v in tensors.items()}, folder)
    edit_config(folder, quantization_config=FP8_BLOCKS[block])
    dequantized_copy(folder, folder.parent / f"{folder.name}-float", block=block, block_scale="weight_scale")
    return folder, draft, block


def test_fp8_block_maps_onto_the_block_scheme_under_compressed_tensors_scale_name():
    p = target_params(FP8_BLOCK)
    assert (p.scheme, p.block, p.block_scale, p.activation, p.modules, p.exclude) == \
        ("block", (128, 128), "weight_scale", "dynamic", ("^",), (r"^lm_head$",))
    weight_only = target_params(ct_config(ct_args("block", False, block_structure=[64, 32]), None))
    assert (weight_only.block, weight_only.block_scale, weight_only.activation) == ((64, 32), "weight_scale", "none")


def test_an_fp8_block_target_loads_bit_for_bit_with_dynamic_group_inputs(fp8_block):
    """Every layer linear holds the stored e4m3 values and its bf16 weight_scale [ceil(out/128), ceil(in/128)] as
    the float32 of the same values, under compressed-tensors' name; inputs per group of block[1] channels."""
    folder, draft, block = fp8_block
    model = assemble(folder, draft)
    ckpt = load_file(str(folder / "model.safetensors"))
    assert fp8_modules(model.target) == set(MODULES)
    state = model.target.state_dict()
    assert state.keys() == ckpt.keys() and not any(k.endswith("_inv") for k in state)
    for k, v in ckpt.items():
        if k.endswith("_scale"):
            assert v.dtype == torch.bfloat16 and state[k].dtype == torch.float32, k
            assert torch.equal(state[k], v.to(torch.float32)), k
        else:
            assert state[k].dtype == v.dtype and torch.equal(bits(state[k]), bits(v)), k
    assert state["model.layers.0.mlp.down_proj.weight_scale"].shape == (1, 256 // block[1])
    assert state["model.layers.0.mlp.up_proj.weight_scale"].shape == (2, 128 // block[1])
    for name in MODULES:
        lin = model.target.get_submodule(name)
        assert (lin.scheme, lin.block, lin.scale_key, lin.activation, lin.native) == \
            ("block", block, "weight_scale", "dynamic", False)   # 128 or 256 wide: no native block product
    assert model.target.dims.config.quantization_config == FP8_BLOCKS[block]


def test_an_fp8_block_target_computes_the_logits_of_a_reference_quantizing_inputs_per_group(fp8_block):
    """float32 logits to 1e-4 of transformers' on the dequantized weights, each quantized linear's input
    fake-quantized per token and group of block[1] channels (what compressed-tensors and vLLM compute)."""
    folder, draft, block = fp8_block
    model = assemble(folder, draft)
    ids = torch.tensor([[5, 17, 3, 88, 41, 9, 60, 2]])
    with torch.no_grad():
        got = model.target.logits(model.target(ids, torch.arange(ids.shape[1])[None])[0])
    want = grouped_reference_logits(folder, ids, group=block[1])
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    assert (grouped_reference_logits(folder, ids, quantize_inputs=False) - want).abs().max() > 1e-3


def test_speculative_greedy_on_an_fp8_block_target_equals_its_target_only_greedy(fp8_block):
    model = assemble(*fp8_block[:2])
    for kw in ({"topk": 2, "steps": 3, "draft_tokens": 6}, {"topk": 1, "steps": 4, "draft_tokens": 5}):
        out = model.generate([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[], **kw)
        base = model.generate_baseline([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[])
        assert [o.token_ids for o in out] == [b.token_ids for b in base]


def test_an_fp8_block_target_with_partial_input_groups_is_refused_by_its_key(
        root, tmp_path, no_tensor_reads):  # noqa: F811 (the fixture imported above)
    folder = write_target(tmp_path / "narrow", "llama", num_hidden_layers=2, seed=1)
    quantize_folder(folder, r"^model\.layers\.\d+\.", quantization_config=True, block_scale="weight_scale")
    assert json.loads((folder / "config.json").read_text())["quantization_config"]["config_groups"]["group_0"][
        "input_activations"]["group_size"] == 128

    no_tensor_reads()
    with pytest.raises(UnsupportedTarget) as err:
        assemble(folder, root / "draft")
    assert "block_structure=[128, 128] is not supported with dynamic group inputs" in str(err.value), str(err.value)
