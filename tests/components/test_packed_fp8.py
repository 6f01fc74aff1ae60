"""FP8 linears on the CPU keep their dequantized weight prepacked (``decoding.linear``): the product equals the
dequantizing reference path up to the packed kernel's rounding, is rebuilt when the stored weight, its scale or the
compute dtype changes, dequantizes nothing in a forward, and ``plain`` leaves the reference path as it was."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from draftsmith.components import packed, quant
from draftsmith.components.quant import FP8Params, fp8_linear, quantize
from draftsmith.components.stacked import stack

from tests.components.test_packed import pytestmark  # noqa: F401  (skipped where oneDNN's linear does not run)

TOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}   # outputs of magnitude ~16-50


def fp8(scheme="block", activation="dynamic", out=256, inp=256, bias=True, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lin = fp8_linear(nn.Linear(inp, out, bias=bias), FP8Params(scheme=scheme, activation=activation), dtype)
    q, s = quantize(torch.randn(out, inp, generator=gen), scheme)
    lin._parameters["weight"].data = q
    setattr(lin, lin.scale_key, s)
    if bias:
        lin.bias.data = torch.randn(out, generator=gen).to(dtype)
    if activation == "static":
        lin.input_scale = torch.tensor([0.02])
    return lin


def reference(lin, x):
    """What the unpacked reference path computes: the fake-quantized input times the dequantized weight."""
    if lin.activation != "none":
        x = quant.fake_quantized(x, lin._buffers.get(quant.INPUT_SCALE), lin._group())
    return F.linear(x, lin.weight, lin.bias)


@pytest.mark.parametrize("scheme,activation", [("block", "dynamic"), ("channel", "dynamic"), ("tensor", "static"),
                                               ("block", "none")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 2, 9])
def test_a_packed_fp8_linear_computes_its_reference_path(scheme, activation, dtype, rows):
    lin = fp8(scheme, activation, dtype=dtype)
    assert packed.pack_linears(lin) == [""] and lin.packs and packed.is_packed(lin)
    # prepacked at once, not in the first forward; bfloat16 only where oneDNN's bf16 path runs on this CPU
    assert (lin._packed is not None) is (dtype in packed.dtypes())
    x = torch.randn(1, rows, 256).to(dtype)
    with torch.no_grad():
        got = lin(x)
    assert got.dtype == dtype and got.shape == (1, rows, 256)
    torch.testing.assert_close(got.float(), reference(lin, x).float(), atol=TOL[dtype], rtol=TOL[dtype])


def test_a_packed_fp8_linear_dequantizes_nothing_in_a_forward(monkeypatch):
    lin = fp8()
    packed.pack_linears(lin)
    calls = []
    real = quant.dequantize
    monkeypatch.setattr(quant, "dequantize", lambda *a: calls.append(1) or real(*a))
    x = torch.randn(4, 256)
    with torch.no_grad():
        for rows in (1, 4, 1):   # one float32 row too: a float linear's gemv would dequantize here
            lin(x[:rows])
    assert calls == []
    with torch.no_grad():
        lin._buffers[lin.scale_key].mul_(2)   # a changed scale: dequantized once again, then reused
        lin(x)
        lin(x)
    assert calls == [1]


@pytest.mark.parametrize("change", ["weight", "scale", "new scale", "dtype"])
def test_the_packed_copy_follows_the_stored_weight_its_scale_and_the_compute_dtype(change):
    lin = fp8(bias=False)
    packed.pack_linears(lin)
    x = torch.randn(3, 256)
    with torch.no_grad():
        lin(x)
        if change == "weight":
            q, _ = quantize(torch.randn(256, 256), "block")
            lin._parameters["weight"].copy_(q)
        elif change == "scale":
            lin._buffers[lin.scale_key].mul_(-3)
        elif change == "new scale":
            lin._buffers[lin.scale_key] = lin._buffers[lin.scale_key] * 0.5
        else:
            lin.compute_dtype = torch.bfloat16
            x = x.to(torch.bfloat16)
        torch.testing.assert_close(lin(x).float(), reference(lin, x).float(), atol=TOL[x.dtype], rtol=TOL[x.dtype])


def test_plain_leaves_fp8_linears_on_the_dequantizing_path(monkeypatch):
    block = nn.ModuleDict({"big": fp8(out=256, inp=256), "small": fp8(out=128, inp=256)})
    assert packed.pack_model(block, "plain", "cpu") == [] and not block["big"].packs
    assert packed.pack_model(block, "auto", "cpu") == ["big"]   # 2^16 stored weights and more, as float linears
    assert block["big"].packs and not block["small"].packs and block["small"]._packed is None
    monkeypatch.setattr(packed, "matmul", lambda *a: pytest.fail("packed product on a plain FP8 linear"))
    x = torch.randn(2, 256)
    with torch.no_grad():
        torch.testing.assert_close(block["small"](x), reference(block["small"], x))


@pytest.mark.parametrize("trained", ["input", "bias"])
def test_autograd_takes_the_dequantizing_path(monkeypatch, trained):
    # the oneDNN op has no backward: an input or a bias autograd follows (a draft trained from an FP8 one, without
    # autocast) computes through the dequantized matmul, whose gradients reach them
    lin = fp8()
    packed.pack_linears(lin)
    monkeypatch.setattr(packed, "matmul", lambda *a: pytest.fail("packed product"))
    lin.bias.requires_grad_(trained == "bias")
    x = torch.randn(3, 256, requires_grad=trained == "input")
    lin(x).sum().backward()
    grad = x.grad if trained == "input" else lin.bias.grad
    assert grad is not None and bool(grad.abs().sum() > 0)


def test_a_trained_bias_of_a_packed_float_linear_gets_its_gradient():
    lin = nn.Linear(256, 256)
    lin.weight.requires_grad_(False)
    packed.pack_linears(lin)
    lin(torch.randn(3, 256)).sum().backward()
    torch.testing.assert_close(lin.bias.grad, torch.full((256,), 3.0))


def test_a_compute_dtype_without_a_onednn_linear_takes_the_dequantizing_path(monkeypatch):
    lin = fp8(bias=False)
    packed.pack_linears(lin)
    monkeypatch.setattr(packed, "matmul", lambda *a: pytest.fail("packed product"))
    with torch.no_grad():
        lin.compute_dtype = torch.float64   # no oneDNN linear in float64: the reference path
        x = torch.randn(2, 256, dtype=torch.float64)
        torch.testing.assert_close(lin(x), reference(lin, x))


def test_an_fp8_fusion_layer_is_not_packed():
    # its fc computes through its own method (Eagle3Fusion.fuse), which a packed copy would never serve
    from draftsmith.components.fusion import Eagle3Fusion

    fc = fp8_linear(Eagle3Fusion(256, 256, (0, 1, 2), False), FP8Params(scheme="channel"))
    assert fc.packs is None and packed.pack_linears(nn.ModuleList([fc, fp8()])) == ["1"]
    assert not packed.is_packed(fc) and fc._packed is None


def test_stacked_fp8_siblings_leave_the_packing_to_their_twin():
    lins = [fp8(out=n, seed=i, bias=False) for i, n in enumerate((256, 128, 128))]
    x = torch.randn(2, 5, 256, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = [l(x) for l in lins]
        s = stack(lins)
        assert packed.pack_linears(nn.ModuleList(lins)) == []   # the siblings are views: the twin runs
        assert packed.pack_linears(s.linear) == [""] and s.linear._packed is not None
        got = s(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=TOL[torch.float32], rtol=TOL[torch.float32])


def test_forget_packed_drops_an_fp8_copy():
    lin = fp8()
    packed.pack_linears(lin)
    packed.forget_packed(nn.Sequential(lin))
    assert lin._packed is None and lin._packed_key is None
    with torch.no_grad():
        x = torch.randn(2, 256)
        torch.testing.assert_close(lin(x), reference(lin, x), atol=TOL[torch.float32], rtol=TOL[torch.float32])
    assert lin._packed is not None


def test_what_was_not_packed_is_not_said_to_be():
    lin, flt = fp8(), nn.Linear(4, 4)
    assert not packed.is_packed(lin) and not packed.is_packed(flt) and not packed.is_packed(nn.LayerNorm(4))
    packed.pack_linears(nn.ModuleList([lin, flt]))
    assert packed.is_packed(lin) and packed.is_packed(flt)


def test_a_compute_dtype_onednn_does_not_take_is_flagged_but_never_reordered():
    lin = fp8(bias=False)
    lin.compute_dtype = torch.float64
    assert packed.pack_linears(lin) == [""] and lin.packs and lin._packed is None   # a later dtype may pack


@pytest.mark.parametrize("scheme", ["block", "channel"])
def test_an_fp8_pair_decodes_the_same_tokens_packed_and_plain(tmp_path, scheme):
    import yaml

    import draftsmith
    from draftsmith.specs.catalog import BUILTIN_DIR
    from draftsmith.testing import write_eagle1, write_target
    from draftsmith.testing.quant import quantize_folder

    write_target(tmp_path / "target", "llama", num_hidden_layers=2, seed=1)
    quantize_folder(tmp_path / "target", r"^model\.layers\.\d+\.", scheme="block", block=(32, 64),
                    quantization_config=True)
    write_eagle1(tmp_path / "draft", tmp_path / "target", bias=False)
    quantize_folder(tmp_path / "draft", r"^layers\.\d+\.", scheme=scheme, block=(32, 32))
    spec = yaml.safe_load((BUILTIN_DIR / "eagle1-llama-fp8.yaml").read_text())
    spec["quant"] |= {"scheme": scheme, "block": [32, 32]}
    (tmp_path / "fp8.yaml").write_text(yaml.safe_dump(spec))
    models = {linear: draftsmith.assemble(draftsmith.load_spec(tmp_path / "fp8.yaml").with_decoding(linear=linear),
                                          target=tmp_path / "target", draft=tmp_path / "draft")
              for linear in ("packed", "plain")}
    fp8_packed = [n for m in (models["packed"].target, models["packed"].draft) for n, sub in m.named_modules()
                  if isinstance(sub, quant.FP8Weight) and sub.packs]
    assert any(n.startswith("model.layers") for n in fp8_packed) and any(n.startswith("layers") for n in fp8_packed)
    assert not any(getattr(sub, "packs", False) for m in (models["plain"].target, models["plain"].draft)
                   for sub in m.modules())
    for prompt in ([[1, 2, 3]], [[7, 8, 9, 10, 11]]):
        got = models["packed"].generate(prompt, max_new_tokens=12, stop=[])[0].token_ids
        assert got == models["packed"].generate_baseline(prompt, max_new_tokens=12, stop=[])[0].token_ids
        assert got == models["plain"].generate(prompt, max_new_tokens=12, stop=[])[0].token_ids
