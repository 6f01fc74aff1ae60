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
from draftsmith.components.quant import quantize
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
