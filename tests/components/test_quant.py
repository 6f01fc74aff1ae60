"""FP8 (e4m3) quant method: per-tensor, per-channel and block scales dequantize exactly like the float copy,
loading keeps the stored fp8 weights and float32 scales, dynamic inputs are quantized per token (tensor, channel)
or per token and group of block[1] channels (block), and quant isolation (invariant 26) both ways: an FP8 draft
leaves the target bit-identical, an FP8 target never quantizes the draft."""
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from safetensors.torch import load_file

import draftsmith
from draftsmith.components.fp8_kernels import fake_quantize, input_scales
from draftsmith.components.quant import FP8Params, FP8Weight, dequantize, fp8_linear, quantize
from draftsmith.components.quant_models import target_params
from draftsmith.errors import SpecError
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import edit_config, write_eagle1, write_target
from draftsmith.testing.quant import dequantized_copy, group_fake_quant, quantize_folder

SCHEMES = ["tensor", "channel", "block"]
BLOCK = (32, 48)  # small blocks so the tiny (64-wide) layers hold several, with ragged edges
# a block target's: its dynamic inputs are quantized in groups of 64 columns, which every 64- or 128-wide input holds
# whole (rows and columns differ, so a group of the wrong side is seen)
TARGET_BLOCK = (32, 64)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_quantize_then_dequantize_is_close_and_shapes_follow_the_scheme(scheme):
    w = torch.randn(80, 100, generator=torch.Generator().manual_seed(0))
    q, s = quantize(w, scheme, BLOCK)
    assert q.dtype == torch.float8_e4m3fn and s.dtype == torch.float32
    assert s.shape == {"tensor": (1,), "channel": (80, 1), "block": (3, 3)}[scheme]
    back = dequantize(q, s, scheme, BLOCK)
    assert ((back - w).abs() <= w.abs() * 2**-3 + 1e-3).all()   # e4m3 keeps 3 mantissa bits


@settings(max_examples=40, deadline=None)
@given(out=st.integers(0, 70), inp=st.integers(0, 70), b0=st.integers(1, 24), b1=st.integers(1, 24))
def test_block_dequantize_is_each_weight_times_its_blocks_scale(out, inp, b0, b1):
    # exactly w[i, j] * scale[i // b0, j // b1] in float32, for widths that hold whole blocks and ragged ones
    gen = torch.Generator().manual_seed(out * 97 + inp)
    w = (torch.randn(out, inp, generator=gen) * 8).to(torch.float8_e4m3fn)
    scale = torch.rand(-(-out // b0), -(-inp // b1), generator=gen) + 0.1
    i, j = torch.arange(out)[:, None], torch.arange(inp)[None]
    want = w.float() * scale[i // b0, j // b1]
    assert torch.equal(dequantize(w, scale, "block", (b0, b1)), want)
    for wrong in ((scale.shape[0], scale.shape[1] + 1), (scale.shape[0] + 1, scale.shape[1]), (scale.shape[0], 1)):
        if wrong != tuple(scale.shape):   # a scale of another shape is refused, never broadcast or cut
            with pytest.raises(ValueError, match="scales"):
                dequantize(w, torch.ones(wrong), "block", (b0, b1))


def test_default_block_is_128x128_and_params_are_frozen():
    """`quant: {method: fp8}` with no block means DeepSeek-V3's 128 x 128 blocks, in a spec and in the writers'
    quantize(); quant params are frozen like the rest of a spec."""
    params = FP8Params()
    assert params.scheme == "block" and params.block == (128, 128)
    with pytest.raises(ValidationError, match="frozen"):
        params.block = (64, 64)
    w = torch.zeros(256, 256)
    w[127, 127], w[128, 128] = 2.0, 1.0  # the last row/column of one block and the first of the next
    assert torch.equal(quantize(w, "block")[1], quantize(w, "block", (128, 128))[1])


@pytest.mark.parametrize("scheme, activation", [("tensor", "dynamic"), ("block", "none"), ("channel", "static")])
def test_fp8_linear_reads_back_in_its_compute_dtype(scheme, activation):
    """The stored fp8 values are loaded, never trained; read back, they have the dtype given, else torch's
    default."""
    lin = fp8_linear(torch.nn.Linear(8, 4, device="meta"), FP8Params(scheme=scheme, activation=activation),
                     torch.bfloat16)
    stored = lin._parameters["weight"]
    assert stored.dtype == torch.float8_e4m3fn and not stored.requires_grad and lin.weight.dtype == torch.bfloat16
    plain = fp8_linear(torch.nn.Linear(8, 4, device="meta"), FP8Params(scheme=scheme))
    assert plain.weight.dtype == torch.get_default_dtype()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fp8")
    write_target(root / "target", "llama", num_hidden_layers=4, seed=1)
    for scheme in SCHEMES:
        write_eagle1(root / f"draft-{scheme}", root / "target", bias=False)
        quantize_folder(root / f"draft-{scheme}", r"^layers\.\d+\.", scheme=scheme, block=BLOCK)
        dequantized_copy(root / f"draft-{scheme}", root / f"draft-{scheme}-float", scheme=scheme, block=BLOCK)
        write_target(root / f"target-{scheme}", "llama", num_hidden_layers=4, seed=1)
        quantize_folder(root / f"target-{scheme}", r"^model\.layers\.\d+\.", scheme="block" if scheme == "block"
                        else "tensor", block=TARGET_BLOCK, quantization_config=True)
        dequantized_copy(root / f"target-{scheme}", root / f"target-{scheme}-float",
                         scheme="block" if scheme == "block" else "tensor", block=TARGET_BLOCK)
        spec = yaml.safe_load((BUILTIN_DIR / "eagle1-llama-fp8.yaml").read_text())
        spec["name"] = f"fp8-{scheme}"
        spec["quant"] |= {"scheme": scheme, "block": list(BLOCK)}
        (root / f"fp8-{scheme}.yaml").write_text(yaml.safe_dump(spec))
    return root


def assemble(root, spec, target, draft, dtype="float32"):
    spec = str(root / f"{spec}.yaml") if spec.startswith("fp8-") else spec
    return draftsmith.assemble(spec, target=root / target, draft=root / draft, dtype=dtype)


def fp8_modules(module):
    return [n for n, m in module.named_modules() if isinstance(m, FP8Weight)]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_fp8_draft_loads_stored_values_and_equals_its_float_copy(root, scheme):
    model = assemble(root, f"fp8-{scheme}", "target", f"draft-{scheme}")
    flt = assemble(root, "eagle1-llama", "target", f"draft-{scheme}-float")
    ckpt = load_file(str(root / f"draft-{scheme}" / "model.safetensors"))
    q = model.draft.layers[0].self_attn.q_proj
    assert len(fp8_modules(model.draft)) == 7 and not fp8_modules(model.target)
    state = model.draft.state_dict()
    for name in ("layers.0.self_attn.q_proj.weight", "layers.0.mlp.down_proj.weight"):
        scale = name.removesuffix("weight") + ("weight_scale_inv" if scheme == "block" else "weight_scale")
        assert state[name].dtype == torch.float8_e4m3fn and torch.equal(state[name].view(torch.uint8),
                                                                         ckpt[name].view(torch.uint8))
        assert state[scale].dtype == torch.float32 and torch.equal(state[scale], ckpt[scale])
    torch.testing.assert_close(q.weight, flt.draft.layers[0].self_attn.q_proj.weight, atol=0, rtol=0)
    ids, pos = torch.tensor([[3, 1, 4, 1, 5]]), torch.arange(5)[None]
    hidden = torch.randn(1, 5, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a = model.draft(ids, hidden, pos, embed=model.draft_embed, from_target=True)[0]
        b = flt.draft(ids, hidden, pos, embed=flt.draft_embed, from_target=True)[0]
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    out = model.generate([[1, 2, 3]], max_new_tokens=8, stop=[], topk=2, steps=3, draft_tokens=6)[0]
    assert out.token_ids == model.generate_baseline([[1, 2, 3]], max_new_tokens=8, stop=[])[0].token_ids


def same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(
        sa[k].dtype == sb[k].dtype and torch.equal(sa[k].view(torch.uint8), sb[k].view(torch.uint8)) for k in sa)


@settings(max_examples=4)
@given(scheme=st.sampled_from(SCHEMES), dtype=st.sampled_from(["float32", "bfloat16"]))
def test_fp8_draft_leaves_the_target_bit_identical(root, scheme, dtype):
    quantized = assemble(root, f"fp8-{scheme}", "target", f"draft-{scheme}", dtype)
    plain = assemble(root, "eagle1-llama", "target", f"draft-{scheme}-float", dtype)
    assert same_state(quantized.target, plain.target) and not fp8_modules(quantized.target)
    assert quantized.target.dims.config.to_dict() == plain.target.dims.config.to_dict()
    assert "quantization_config" not in quantized.target.dims.config.to_dict()
    assert all(p.dtype == getattr(torch, dtype) for p in quantized.target.parameters())


@settings(max_examples=4)
@given(scheme=st.sampled_from(["tensor", "block"]), dtype=st.sampled_from(["float32", "bfloat16"]))
@example(scheme="block", dtype="float32")   # the logits check, each run
@example(scheme="tensor", dtype="float32")
def test_fp8_target_never_quantizes_the_draft(root, scheme, dtype):
    fp8_target = assemble(root, "eagle1-llama", f"target-{scheme}", f"draft-{scheme}-float", dtype)
    float_target = assemble(root, "eagle1-llama", f"target-{scheme}-float", f"draft-{scheme}-float", dtype)
    assert fp8_modules(fp8_target.target) and not fp8_modules(fp8_target.draft)
    assert same_state(fp8_target.draft, float_target.draft)
    assert all(p.dtype == getattr(torch, dtype) for p in fp8_target.draft.parameters())
    assert "quantization_config" in fp8_target.target.dims.config.to_dict()   # read, kept, and only the target's
    if dtype == "float32":  # the FP8 target computes with exactly its dequantized weights
        ids = torch.tensor([[5, 6, 7, 8]])
        pos = torch.arange(4)[None]
        with torch.no_grad():
            a = fp8_target.target.logits(fp8_target.target(ids, pos)[0])
            b = float_target.target.logits(float_target.target(ids, pos)[0])
        if scheme == "block":   # activation_scheme dynamic: on inputs quantized per token and group of block[1]
            b = grouped_reference_logits(root / "target-block-float", fp8_modules(fp8_target.target), ids)
        torch.testing.assert_close(a, b, atol=1e-5 if scheme != "block" else 1e-4, rtol=0)


def grouped_reference_logits(folder, modules, ids):
    """transformers' Llama on the dequantized weights, each of ``modules``' input fake-quantized per token and group
    of TARGET_BLOCK[1] channels (draftsmith's float target fuses some linears: no hook would see their inputs)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    for name in modules:
        model.get_submodule(name).register_forward_pre_hook(lambda _, args: (group_fake_quant(args[0],
                                                                                              TARGET_BLOCK[1]),))
    with torch.no_grad():
        return model(ids).logits


def test_unsupported_target_quantization_is_refused_by_name():
    with pytest.raises(ValueError, match="quant_method='awq'"):
        target_params({"quant_method": "awq"})
    assert target_params(None) is None
    p = target_params({"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["gate"]})
    assert p.scheme == "block" and p.block == (128, 128) and any("gate" in e for e in p.exclude)
    assert p.activation == "dynamic"   # FineGrainedFP8Config's default activation_scheme


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_static_fp8_linear_holds_a_float32_input_scale_it_quantizes_its_input_with(scheme):
    """activation: static: input_scale [1] (0-d loadable), kept float32 at load; the input is e4m3(x / s) * s,
    clamped at +-448, before the matmul with the dequantized weight (here on the CPU: every device does it)."""
    lin = fp8_linear(torch.nn.Linear(100, 80, bias=True, device="meta"), FP8Params(scheme=scheme, activation="static",
                                                                                  block=BLOCK), torch.float32)
    assert lin.stored_dtypes()["input_scale"] == torch.float32 and lin.loadable_shapes()["input_scale"] == ((),)
    w = torch.randn(80, 100, generator=torch.Generator().manual_seed(0))
    q, s = quantize(w, scheme, BLOCK)
    scale = "weight_scale_inv" if scheme == "block" else "weight_scale"
    lin.load_state_dict({"weight": q, scale: s, "bias": torch.zeros(80), "input_scale": torch.tensor(0.01)},
                        assign=True)
    assert lin.input_scale.shape == (1,)
    x = torch.randn(2, 3, 100, generator=torch.Generator().manual_seed(1)) * 3   # some |x| / 0.01 past 448
    xq = ((x / 0.01).clamp(-448, 448).to(torch.float8_e4m3fn).to(torch.float32) * torch.tensor(0.01))
    torch.testing.assert_close(lin(x), xq @ dequantize(q, s, scheme, BLOCK).T, atol=1e-5, rtol=0)
    assert not torch.allclose(lin(x), x @ dequantize(q, s, scheme, BLOCK).T, atol=1e-3)


def test_spec_rejects_unknown_fp8_fields(tmp_path):
    spec = yaml.safe_load((BUILTIN_DIR / "eagle1-llama-fp8.yaml").read_text())
    spec["quant"]["scales"] = "block"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(Exception, match="scales"):
        draftsmith.load_spec(tmp_path / "bad.yaml")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_inspect_proposes_the_fp8_spec_its_scales_show(root, scheme, tmp_path):
    """An FP8 EAGLE-1 draft is detected as eagle1-llama-fp8 (it was proposed the float spec), its scheme read from
    the stored scales, its block size from the config's weight_block_size; the proposed spec loads the values the
    float copy holds. Without the config, the shapes allow 32..42 x 43..63: a guess, said."""
    from draftsmith.convert.inspect import inspect_checkpoint

    draft = Path(shutil.copytree(root / f"draft-{scheme}", tmp_path / "d"))
    if scheme == "block":
        guessed = inspect_checkpoint(draft)
        assert "a guess: the shapes allow block sizes 32..42 x 43..63" in guessed.match.assumptions[-1]
        edit_config(draft, quantization_config={"quant_method": "fp8", "weight_block_size": list(BLOCK)})
    found = inspect_checkpoint(draft)
    assert found.match.spec == "eagle1-llama-fp8" and found.spec["quant"]["scheme"] == scheme
    model = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=root / "target")
    flt = assemble(root, "eagle1-llama", "target", f"draft-{scheme}-float")
    for name in ("self_attn.q_proj", "mlp.down_proj"):
        mine, ref = (m.draft.layers[0].get_submodule(name).weight for m in (model, flt))
        assert torch.equal(mine, ref), name


@pytest.mark.parametrize("family", ["eagle3", "mtp"])
def test_inspect_proposes_fp8_for_any_family_whose_layers_hold_scales(family, tmp_path):
    """An EAGLE-3 draft, or a DeepSeek MTP layer, whose linears are FP8 with weight_scale_inv: inspect's spec says
    quant fp8 on those modules (it said none, and did not load), and the loaded weights are the float copy's."""
    from draftsmith.convert.inspect import inspect_checkpoint
    from draftsmith.testing import write_eagle3
    from draftsmith.testing.mtp import write_mtp

    if family == "eagle3":
        target = write_target(tmp_path / "t", "llama", num_hidden_layers=8)
        draft = write_eagle3(tmp_path / "d", target)
        quantize_folder(draft, r"^midlayer\.(self_attn|mlp)\.", scheme="block", block=(32, 32))
        dequantized_copy(draft, tmp_path / "float", scheme="block", block=(32, 32))
        float_target, float_draft = target, tmp_path / "float"
    else:   # the MTP layer lives in the target's own files: both quantized, as DeepSeek ships them
        target = draft = write_mtp(write_target(tmp_path / "t", "llama", num_hidden_layers=4))
        quantize_folder(target, r"^model\.layers\.\d+\.(self_attn|mlp)\.", scheme="block", block=(32, 32),
                        quantization_config=True)
        float_target = float_draft = dequantized_copy(target, tmp_path / "float", scheme="block", block=(32, 32))
    found = inspect_checkpoint(draft)
    assert found.spec["quant"]["method"] == "fp8" and found.spec["quant"]["block"] == [32, 32]
    model = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, draft=draft, dtype="float64")
    ref = draftsmith.assemble(found.match.spec, target=float_target, draft=float_draft, dtype="float64")
    assert fp8_modules(model.draft)
    q = lambda m: m.draft.layers[0].self_attn.q_proj.weight   # noqa: E731
    torch.testing.assert_close(q(model), q(ref), atol=0, rtol=0)


@pytest.mark.parametrize("scheme", ["tensor", "channel"])
def test_dynamic_inputs_are_quantized_per_token_on_the_cpu_too(scheme):
    """activation: dynamic computes on the CPU what the CUDA kernel and compressed-tensors compute: each token's
    input quantized to e4m3 with its own max-abs / 448 (a token's output does not depend on the others'), then the
    dequantized matmul. (Block scales: per group, the tests below.)"""
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32, bias=True)
    w = lin.weight.detach().float()
    fp8_linear(lin, FP8Params(scheme=scheme, activation="dynamic"), torch.float32)
    q, s = quantize(w, scheme)
    lin._parameters["weight"].data, lin.weight_scale = q, s
    x = torch.randn(3, 64) * torch.tensor([[1.0], [1e3], [1e-3]])
    scale = x.abs().amax(-1, keepdim=True) / 448
    fp8_in = (x / scale).to(torch.float8_e4m3fn).float() * scale
    got = lin(x)
    torch.testing.assert_close(got, torch.nn.functional.linear(fp8_in, lin.weight, lin.bias), atol=1e-5, rtol=1e-5)
    assert (got - torch.nn.functional.linear(x, lin.weight, lin.bias)).abs().max() > 1e-4   # not a no-op
    for i in range(3):   # per token: a row alone gives the same output
        torch.testing.assert_close(lin(x[i:i + 1]), got[i:i + 1], atol=1e-5, rtol=1e-5)


GROUP_BLOCK = (16, 32)   # rows x columns: the input groups are 32 channels, never the 16 rows


def block_linear(inp, out, bias, weight=None, scale=None):
    """A dynamic block FP8 linear of GROUP_BLOCK (random max-abs scaled weights, or those given)."""
    lin = torch.nn.Linear(inp, out, bias=bias)
    w = lin.weight.detach().float()
    fp8_linear(lin, FP8Params(scheme="block", block=GROUP_BLOCK, activation="dynamic"), torch.float32)
    q, s = quantize(w, "block", GROUP_BLOCK) if weight is None else (weight, scale)
    lin._parameters["weight"].data, lin.weight_scale_inv = q, s
    assert not lin.native   # no native kernel for these blocks: the reference path on every device
    return lin


def test_dynamic_block_inputs_are_quantized_per_token_and_group_of_block_columns():
    """FineGrainedFP8 / DeepSeek-V3 as their engines compute it: each token's input quantized in groups of block[1]
    channels, each group with its own max-abs / 448, then the block-dequantized matmul (an independent reference:
    groups written out, each weight block times its scale)."""
    torch.manual_seed(0)
    lin = block_linear(96, 40, True)
    q, s = lin._parameters["weight"], lin.weight_scale_inv
    assert s.shape == (3, 3)
    w = torch.empty(40, 96)
    for i in range(3):
        for j in range(3):
            rows, cols = slice(16 * i, 16 * i + 16), slice(32 * j, 32 * j + 32)
            w[rows, cols] = q[rows, cols].to(torch.float32) * s[i, j]
    x = torch.randn(2, 5, 96) * torch.tensor([1.0] * 32 + [1e3] * 32 + [1e-3] * 32)   # groups far apart in scale
    got = lin(x)
    torch.testing.assert_close(got, group_fake_quant(x, 32) @ w.T + lin.bias, atol=1e-5, rtol=1e-5)
    assert (got - (x @ w.T + lin.bias)).abs().max() > 1e-3   # not a no-op
    torch.testing.assert_close(fake_quantize(x, input_scales(x, None, 32)), group_fake_quant(x, 32), atol=0, rtol=0)


def test_a_tokens_group_quantization_depends_on_no_other_token_or_group():
    """Through an identity block linear (e4m3 ones on the diagonal, scales 1) the output is the quantized input:
    a group scaled by 1e3 leaves every other group of the token, and every other token, bit for bit as they were;
    a token alone is quantized as within the batch; a group of zeros stays zeros."""
    eye = block_linear(96, 96, False, torch.eye(96).to(torch.float8_e4m3fn), torch.ones(6, 3))
    x = torch.randn(4, 96, generator=torch.Generator().manual_seed(2))
    base = eye(x)
    assert torch.equal(base, group_fake_quant(x, 32)) and not torch.equal(base, x)
    loud = x.clone()
    loud[1, 32:64] *= 1e3
    moved = eye(loud)
    assert torch.equal(moved[[0, 2, 3]], base[[0, 2, 3]])                                 # the other tokens
    assert torch.equal(moved[1, :32], base[1, :32]) and torch.equal(moved[1, 64:], base[1, 64:])   # other groups
    torch.testing.assert_close(moved[1, 32:64], base[1, 32:64] * 1e3, rtol=1e-6, atol=0)  # that group's own scale
    for i in range(4):
        assert torch.equal(eye(x[i:i + 1]), base[i:i + 1])
    silent = x.clone()
    silent[2, 64:] = 0   # a group of zeros: zeros (its scale is kept off 0), the token's other groups as they were
    assert torch.equal(eye(silent)[2], torch.cat([base[2, :64], torch.zeros(32)]))


def test_dynamic_block_inputs_in_a_partial_group_are_refused_in_a_spec(root, tmp_path, monkeypatch):
    """DeepSeek-V3's act_quant, vLLM's and SGLang's per_token_group_quant_fp8 assert a whole number of groups; a
    draft spec whose block[1] leaves one is a SpecError at quant.block naming the linears, before any tensor is
    read (the eagle1 draft's linears are 64 and 128 wide: 48 divides neither)."""
    spec = yaml.safe_load((BUILTIN_DIR / "eagle1-llama-fp8.yaml").read_text())
    spec["name"] = "fp8-partial"
    spec["quant"] |= {"scheme": "block", "block": list(BLOCK), "activation": "dynamic"}
    (tmp_path / "fp8-partial.yaml").write_text(yaml.safe_dump(spec))

    def no_read(*_, **__):
        raise AssertionError("tensor data was read before the spec was checked")

    for where in ("checkpoint", "load", "assemble"):
        monkeypatch.setattr(f"draftsmith.assembler.{where}.read_tensors", no_read)
    with pytest.raises(SpecError) as err:
        draftsmith.assemble(str(tmp_path / "fp8-partial.yaml"), target=root / "target", draft=root / "draft-block")
    text = str(err.value)
    assert "quant.block" in text and "groups of block[1] = 48 channels" in text, text
    assert "layers.0.self_attn.q_proj (64 wide)" in text and "a block[1] dividing 64" in text, text
    with pytest.raises(ValueError, match="no whole number of 48-channel groups"):   # and the function itself
        input_scales(torch.ones(2, 64), None, 48)
