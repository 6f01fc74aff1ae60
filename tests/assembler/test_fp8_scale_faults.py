"""FP8 checkpoints whose values would read back as garbage are refused at load, naming file and tensor (found by a
dogfooding pass; each loaded silently): a weight in another FP8 format (e5m2 cast to e4m3fn clamps past 448), a
negative scale, a scale of 0 over weights that are not 0, a static input scale of 0, and weights times scales past a
float16 load's range. A block of zeros with a zero scale still loads (a quantizer may write amax / fmax = 0)."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components.quant import FP8Params, fp8_linear, quantize
from draftsmith.components.quant_models import scale_faults
from draftsmith.errors import CheckpointError
from draftsmith.testing import write_eagle1, write_target
from draftsmith.testing.quant import quantize_folder

KEY = "layers.0.self_attn.q_proj.weight_scale_inv"
WEIGHT = "layers.0.self_attn.q_proj.weight"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("fp8faults")
    target = write_target(root / "t", "llama", num_hidden_layers=2, seed=3)
    draft = write_eagle1(root / "d", target)
    quantize_folder(draft, r"^layers\.0\.", scheme="block", block=(16, 16))
    data = draftsmith.load_spec("eagle1-llama-fp8").model_dump(mode="json")
    data["quant"]["block"] = [16, 16]
    return root, target, draft, draftsmith.parse_spec(data, source="eagle1-llama-fp8, 16x16 blocks")


def edited(pair, name, edit) -> object:
    """A copy of the FP8 draft folder with ``edit`` applied to its tensors."""
    root, _, draft, _ = pair
    folder = root / name
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(draft, folder)
    tensors = load_file(str(draft / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def load(pair, draft, dtype="float32"):
    _, target, _, spec = pair
    return draftsmith.assemble(spec, target=target, draft=draft, dtype=dtype)


def test_the_draft_as_quantized_loads(pair):
    load(pair, pair[2])


def _set_scale(value):
    def edit(t):
        t[KEY] = t[KEY].clone()
        t[KEY][0, 0] = value
    return edit


def test_a_negative_scale_is_refused(pair):
    with pytest.raises(CheckpointError, match=rf"'{KEY}': 1 negative scale\(s\)"):
        load(pair, edited(pair, "negative", _set_scale(-0.01)))


def test_a_zero_scale_over_weights_is_refused_and_over_a_zero_block_loads(pair):
    with pytest.raises(CheckpointError, match=rf"'{KEY}': a scale of 0 over weights that are not 0"):
        load(pair, edited(pair, "zero", _set_scale(0.0)))

    def zero_block(t):
        _set_scale(0.0)(t)
        w = t[WEIGHT].view(torch.uint8).clone()
        w[:16, :16] = 0   # +0 in e4m3fn
        t[WEIGHT] = w.view(torch.float8_e4m3fn)
    model = load(pair, edited(pair, "zero-block", zero_block))
    assert float(model.draft.layers[0].self_attn.q_proj.weight[:16, :16].abs().max()) == 0.0


def test_another_fp8_format_is_refused_not_clamped(pair):
    def e5m2(t):
        for name in [n for n, v in t.items() if v.dtype == torch.float8_e4m3fn]:
            t[name] = t[name].to(torch.float8_e5m2)
    with pytest.raises(CheckpointMismatch, match="is float8_e5m2 in the checkpoint, the model expects "
                                                 "float8_e4m3fn: one FP8 format is not cast into another"):
        load(pair, edited(pair, "e5m2", e5m2))


def test_weights_times_scales_past_float16_are_refused_in_float16_only(pair):
    folder = edited(pair, "huge", lambda t: t.__setitem__(KEY, t[KEY] * 1e7))   # weights of ~0.02 become ~2e5
    with pytest.raises(CheckpointError, match=rf"'{WEIGHT}': weights times their scales past float16's range"):
        load(pair, folder, dtype="float16")
    load(pair, folder, dtype="float32")


def test_a_target_static_input_scale_of_zero_is_refused(tmp_path):
    target = write_target(tmp_path / "t", "llama", num_hidden_layers=2, seed=3)
    out = {}
    for name, value in load_file(str(target / "model.safetensors")).items():
        if name.startswith("model.layers.") and name.endswith("proj.weight"):
            w, s = quantize(value, "tensor")
            prefix = name.removesuffix("weight")
            out[name], out[prefix + "weight_scale"], out[prefix + "input_scale"] = w, s, torch.tensor([0.05])
        else:
            out[name] = value
    out["model.layers.1.self_attn.q_proj.input_scale"] = torch.tensor([0.0])
    save_file(out, str(target / "model.safetensors"))
    config = json.loads((target / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "static"}
    (target / "config.json").write_text(json.dumps(config))
    draft = write_eagle1(tmp_path / "d", target)
    with pytest.raises(CheckpointError, match=r"'model.layers.1.self_attn.q_proj.input_scale': an input scale of "
                                              r"0.0: the input is divided by it"):
        draftsmith.assemble("eagle1-llama", target=target, draft=draft, dtype="float32")


def _fp8_linear(scheme, block=(16, 16)):
    """One FP8 linear (32 x 32, no bias) and its state: weights of 1.0 each, scales of 1.0."""
    linear = fp8_linear(torch.nn.Linear(32, 32, bias=False, device="meta"), FP8Params(scheme=scheme, block=block))
    shape = linear._buffers[linear.scale_key].shape
    state = {"weight": torch.ones(32, 32).to(torch.float8_e4m3fn), linear.scale_key: torch.ones(shape)}
    return linear, state


# kills quant_models.py:129  `bool((s == 0).any()) and ...` -> `(s != 0).any()`
# (a per-tensor scale of 0 has no other scale beside it: every weight would read as 0)
def test_a_per_tensor_scale_of_zero_over_weights_is_a_fault():
    linear, state = _fp8_linear("tensor")
    state["weight_scale"] = torch.zeros(1)
    assert scale_faults(linear, state, torch.float32) == [
        ("weight_scale", "a scale of 0 over weights that are not 0: they would read as 0")]


# kills quant_models.py:127  `int((s < 0).sum())` -> `int((s <= 0).sum())` (a zero scale counted as negative)
def test_only_the_negative_scales_are_counted():
    linear, state = _fp8_linear("block")
    state["weight_scale_inv"][0, 0], state["weight_scale_inv"][0, 1] = -0.5, 0.0
    [(name, why)] = scale_faults(linear, state, torch.float32)
    assert name == "weight_scale_inv" and why.startswith("1 negative scale(s) ")


# kills quant_models.py:124  `if w is None or s is None` -> `and` (a linear with only one of its tensors in the
# state, another module's, is not judged)
@pytest.mark.parametrize("left_out", ["weight", "weight_scale_inv"])
def test_a_linear_missing_its_weight_or_scale_in_the_state_is_not_judged(left_out):
    linear, state = _fp8_linear("block")
    del state[left_out]
    assert scale_faults(linear, state, torch.float16) == []


# kills quant_models.py:132  `float(dequantize(...).abs().max()) > torch.finfo(dtype).max` -> `>=`
# (a weight reading exactly float16's largest value, 65504 = 256 * 255.875, is read as it is, not as inf)
def test_a_weight_reading_exactly_float16s_largest_value_is_no_fault():
    linear, state = _fp8_linear("tensor")
    state["weight"][0, 0] = 256.0
    state["weight_scale"] = torch.tensor([255.875])
    assert scale_faults(linear, state, torch.float16) == []
    state["weight"][0, 0] = 288.0   # 73692: past float16
    assert [name for name, _ in scale_faults(linear, state, torch.float16)] == ["weight"]
