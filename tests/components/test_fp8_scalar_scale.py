"""A per-tensor FP8 ``weight_scale`` stored 0-d (shape ``()``, as several quantizers write it) is the same one value
as the [1] draftsmith holds: a draft (or target) storing it so loads, equal to the same checkpoint with [1] scales
(stored values, dequantized weights, draft outputs, generate() tokens); a scale of another shape ([2], [1, 1]) is
still refused by the load plan, before any tensor data is read, with the wrong-shape line naming the shapes the
model loads."""
import shutil

import pytest
import torch
import yaml
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler.assemble import plan_assembly
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.plan import CheckpointMismatch, expected_of
from draftsmith.components.quant import FP8Params, fp8_linear, quantize
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle1, write_target
from draftsmith.testing.quant import dequantized_copy, quantize_folder

SCALES = ".weight_scale"
SHAPES = {"0d": (), "1": (1,)}


def restore(src, dst, shape):
    """A copy of folder ``src`` whose per-tensor weight scales are stored with ``shape`` (same values)."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, dst / f.name)
    tensors = load_file(str(src / "model.safetensors"))
    save_safetensors({k: v.reshape(-1)[0].expand(shape).clone() if k.endswith(SCALES) else v
                      for k, v in tensors.items()}, dst)
    return dst


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fp8-scalar")
    write_target(root / "target", "llama", num_hidden_layers=4, seed=1)
    write_eagle1(root / "draft", root / "target", bias=False)
    quantize_folder(root / "draft", r"^layers\.\d+\.", scheme="tensor")   # writes [1] scales: the reference
    dequantized_copy(root / "draft", root / "draft-float", scheme="tensor")
    for label, shape in SHAPES.items():
        restore(root / "draft", root / f"draft-{label}", shape)
    restore(root / "draft", root / "draft-2", (2,))      # truly wrong: two values (the one repeated)
    restore(root / "draft", root / "draft-1x1", (1, 1))  # one value, but not a shape any quantizer writes for it
    write_target(root / "fp8-target", "llama", num_hidden_layers=4, seed=1)
    quantize_folder(root / "fp8-target", r"^model\.layers\.\d+\.", scheme="tensor", quantization_config=True)
    restore(root / "fp8-target", root / "fp8-target-0d", ())
    spec = yaml.safe_load((BUILTIN_DIR / "eagle1-llama-fp8.yaml").read_text())
    spec["name"] = "fp8-tensor"
    spec["quant"] |= {"scheme": "tensor"}
    (root / "fp8-tensor.yaml").write_text(yaml.safe_dump(spec))
    return root


def assemble(root, draft, spec="fp8-tensor", target="target"):
    spec = str(root / f"{spec}.yaml") if spec == "fp8-tensor" else spec
    return draftsmith.assemble(spec, target=root / target, draft=root / draft, dtype="float32")


def test_the_writer_stores_the_shape_each_folder_is_named_for(root):
    for folder, shape in [("draft", (1,)), ("draft-0d", ()), ("draft-1", (1,)), ("draft-2", (2,)),
                          ("draft-1x1", (1, 1))]:
        tensors = load_file(str(root / folder / "model.safetensors"))
        scales = {k: tuple(v.shape) for k, v in tensors.items() if k.endswith(SCALES)}
        assert len(scales) == 7 and set(scales.values()) == {shape}, (folder, scales)


@pytest.mark.parametrize("label", list(SHAPES))
def test_a_0d_or_1_element_per_tensor_scale_loads_equal_to_the_reference(root, label):
    model, ref = assemble(root, f"draft-{label}"), assemble(root, "draft")
    flt = assemble(root, "draft-float", spec="eagle1-llama")
    ckpt = load_file(str(root / f"draft-{label}" / "model.safetensors"))
    state, ref_state = model.draft.state_dict(), ref.draft.state_dict()
    assert state.keys() == ref_state.keys()
    scales = [k for k in state if k.endswith(SCALES)]
    assert len(scales) == 7
    for k in scales:   # held as [1] whatever the file's shape, with the file's value
        assert state[k].shape == (1,) and state[k].dtype == torch.float32
        assert torch.equal(state[k], ref_state[k]) and torch.equal(state[k].reshape(ckpt[k].shape), ckpt[k])
    for k in state:
        assert state[k].dtype == ref_state[k].dtype and torch.equal(state[k].view(torch.uint8),
                                                                    ref_state[k].view(torch.uint8)), k
    for name in ("self_attn.q_proj", "self_attn.k_proj", "mlp.down_proj"):
        a, b, c = (m.draft.get_submodule(f"layers.0.{name}").weight for m in (model, ref, flt))
        assert torch.equal(a, b) and torch.equal(a, c)   # the dequantized weight, also as its float copy
    ids, pos = torch.tensor([[3, 1, 4, 1, 5]]), torch.arange(5)[None]
    hidden = torch.randn(1, 5, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a = model.draft(ids, hidden, pos, embed=model.draft_embed, from_target=True)[0]
        b = ref.draft(ids, hidden, pos, embed=ref.draft_embed, from_target=True)[0]
    assert torch.equal(a, b)
    kw = {"max_new_tokens": 10, "stop": [], "topk": 2, "steps": 3, "draft_tokens": 6}
    got, want = model.generate([[1, 2, 3]], **kw)[0], ref.generate([[1, 2, 3]], **kw)[0]
    assert got.token_ids == want.token_ids
    assert got.stats.accepted_per_position == want.stats.accepted_per_position


def test_an_fp8_target_with_0d_per_tensor_scales_loads_equal_to_its_1_element_twin(root):
    """The target's own quantization_config (compressed-tensors weight-only, per-tensor scales) loads 0-d scales
    too."""
    a = draftsmith.assemble("eagle1-llama", target=root / "fp8-target-0d", draft=root / "draft-float", dtype="float32")
    b = draftsmith.assemble("eagle1-llama", target=root / "fp8-target", draft=root / "draft-float", dtype="float32")
    sa, sb = a.target.state_dict(), b.target.state_dict()
    assert sum(k.endswith(SCALES) for k in sa) == 4 * 7
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k].view(torch.uint8), sb[k].view(torch.uint8)) for k in sa)
    kw = {"max_new_tokens": 8, "stop": []}
    assert a.generate([[5, 6, 7]], **kw)[0].token_ids == b.generate([[5, 6, 7]], **kw)[0].token_ids


@pytest.mark.parametrize("label, shape", [("2", "[2]"), ("1x1", "[1, 1]")])
def test_a_scale_of_another_shape_is_refused_by_the_plan_before_any_tensor_is_read(root, label, shape,
                                                                                   no_tensor_reads):
    no_tensor_reads("the shapes were checked")
    for attempt in (lambda: plan_assembly(str(root / "fp8-tensor.yaml"), target=root / "target",
                                          draft=root / f"draft-{label}"),
                    lambda: assemble(root, f"draft-{label}")):
        with pytest.raises(CheckpointMismatch) as err:
            attempt()
        lines = err.value.problems
        assert len(lines) == 7 and all(line.startswith("wrong shape: 'layers.0.") for line in lines), lines
        assert all(f"{SCALES}' is {shape} in the checkpoint, the model expects [1] or [] (no rule matched; name "
                   "kept)" in line for line in lines), lines
        assert f"draft-{label} does not fit spec 'fp8-tensor': 7 problems" in str(err.value)


def test_only_a_per_tensor_scale_has_another_loadable_shape():
    """Channel ([out, 1]) and block scales, and every weight, are expected in their own shape alone; a static
    input_scale [1] also 0-d."""
    for scheme, also in [("tensor", {"weight_scale": ((),)}), ("channel", {}), ("block", {})]:
        lin = fp8_linear(torch.nn.Linear(8, 4, device="meta"), FP8Params(scheme=scheme))
        exp = expected_of(lin)
        assert {k: v.also for k, v in exp.items() if v.also} == also, scheme
        static = fp8_linear(torch.nn.Linear(8, 4, device="meta"), FP8Params(scheme=scheme, activation="static"))
        exp = expected_of(static)   # a static input scale is per tensor on every scheme: [1] or 0-d
        assert {k: v.also for k, v in exp.items() if v.also} == also | {"input_scale": ((),)}, scheme
        assert exp["input_scale"].shape == (1,) and exp["input_scale"].dtype == torch.float32


def test_an_fp8_linear_takes_a_0d_scale_in_load_state_dict_and_refuses_a_wrong_one():
    w = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    q, s = quantize(w, "tensor")
    for scale in (s, s.reshape(())):
        lin = fp8_linear(torch.nn.Linear(8, 4, bias=False, device="meta"), FP8Params(scheme="tensor"), torch.float32)
        lin.load_state_dict({"weight": q, "weight_scale": scale}, assign=True)
        assert lin.weight_scale.shape == (1,) and torch.equal(lin.weight_scale, s.reshape(1))
        assert torch.equal(lin.weight, q.to(torch.float32) * s)
    lin = fp8_linear(torch.nn.Linear(8, 4, bias=False, device="meta"), FP8Params(scheme="tensor"))
    with pytest.raises(RuntimeError, match="size mismatch for weight_scale"):
        lin.load_state_dict({"weight": q, "weight_scale": s.repeat(2)}, assign=True)
