"""The native FP8 products (draftsmith.components.fp8_kernels): which linears try one, the argument layouts torch's
``_scaled_mm`` reads (row-wise on the CPU's own kernel; block scales against their contract as torch's
ScaledBlas.cpp checks it, emulated here), and the check that keeps a kind of product only where it ran and agreed
with the reference path. The GPU tests run the real kernels against the reference path."""
import logging
from types import SimpleNamespace

import pytest
import torch

from draftsmith.components import fp8_kernels, fused, quant
from draftsmith.components.fp8_kernels import FP8, block_mm, checked, native_ok, rowwise_mm
from draftsmith.components.quant import FP8Params, fp8_linear, quantize


@pytest.fixture(autouse=True)
def fresh_verdicts(monkeypatch):
    monkeypatch.setattr(fp8_kernels, "VERDICTS", {})


@pytest.mark.parametrize("scheme, activation, block, width, native", [
    ("tensor", "dynamic", (128, 128), 256, True), ("channel", "static", (128, 128), 256, True),
    ("block", "dynamic", (128, 128), 512, True), ("block", "dynamic", (128, 128), 1024, True),
    ("tensor", "none", (128, 128), 256, False), ("block", "static", (128, 128), 512, False),
    ("block", "dynamic", (64, 128), 512, False), ("block", "dynamic", (128, 64), 512, False),
    ("tensor", "dynamic", (128, 128), 200, False), ("block", "dynamic", (128, 128), 256, False),
    ("block", "dynamic", (128, 128), 640, False)])
def test_which_linears_try_a_native_product(scheme, activation, block, width, native):
    """Quantized inputs, widths multiples of 16 (cuBLAS's fp8 alignment), block scales only 128 x 128 with dynamic
    inputs (cuBLAS's one block size) over whole 512 input columns (cuBLAS reads the block scales in rows of 4);
    everything else computes the reference path on every device. The output width is free for blocks."""
    lin = fp8_linear(torch.nn.Linear(width, 128, device="meta"),
                     FP8Params(scheme=scheme, activation=activation, block=block), torch.bfloat16)
    assert lin.native is native
    wide = fp8_linear(torch.nn.Linear(512, 128 + width, device="meta"),
                      FP8Params(scheme=scheme, activation=activation, block=block), torch.bfloat16)
    assert wide.native is (activation != "none" and block[0] == block[1] == 128
                           and (scheme != "block" or activation == "dynamic") and width % 16 == 0)


def test_native_products_take_only_bfloat16_cuda_inputs(monkeypatch):
    """torch._scaled_mm writes row-wise and block scaled products into bfloat16 on every GPU, other dtypes only on
    some: a float16 or float32 input takes the reference path on CUDA too, as does a torch without _scaled_mm."""
    cuda = lambda dtype: SimpleNamespace(is_cuda=True, dtype=dtype)   # noqa: E731
    assert native_ok(cuda(torch.bfloat16))
    assert not native_ok(cuda(torch.float16)) and not native_ok(cuda(torch.float32))
    assert not native_ok(torch.zeros(1, dtype=torch.bfloat16))   # on the CPU
    monkeypatch.delattr(torch, "_scaled_mm", raising=False)
    assert not native_ok(cuda(torch.bfloat16))


def linear(scheme, activation, inp=512, out=384, seed=0):
    """A bfloat16 FP8 linear whose weight blocks span 2^-6..2^6 in magnitude (so a scale read from the wrong block,
    row or column is far off), with a bias."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(out, inp, generator=gen)
    w *= torch.exp2(torch.randint(-6, 7, (-(-out // 128), -(-inp // 128)), generator=gen).float()
                    ).repeat_interleave(128, 0).repeat_interleave(128, 1)[:out, :inp]
    lin = fp8_linear(torch.nn.Linear(inp, out), FP8Params(scheme=scheme, activation=activation), torch.bfloat16)
    q, s = quantize(w, scheme)
    lin._parameters["weight"].data = q
    setattr(lin, lin.scale_key, s)
    lin.bias.data = torch.randn(out, generator=gen).to(torch.bfloat16)
    if activation == "static":
        lin.input_scale = torch.tensor([0.02])
    return lin


def inputs(*shape, seed=1):
    gen = torch.Generator().manual_seed(seed)
    spread = torch.exp2(torch.randint(-5, 6, shape, generator=gen).float())   # tokens and groups far apart
    return (torch.randn(shape, generator=gen) * spread).to(torch.bfloat16)


def close(got, want):
    err, size = (got.float() - want.float()).abs().max().item(), want.float().abs().max().item()
    return err <= 0.01 * size


@pytest.mark.parametrize("scheme, activation", [("tensor", "dynamic"), ("channel", "dynamic"), ("tensor", "static"),
                                                ("channel", "static")])
def test_rowwise_mm_lays_its_scales_out_as_torchs_kernel_reads_them(scheme, activation):
    """torch's CPU _scaled_mm has the row-wise kernel (torch 2.13; 2.11's is per-tensor only): rowwise_mm's
    arguments computed by it equal the reference path (the same fp8 inputs; bf16 roundings apart) for 1, 5 and
    2 x 3 tokens."""
    one = torch.ones(2, 16).to(FP8)
    try:
        torch._scaled_mm(one, one.t(), scale_a=torch.ones(2, 1), scale_b=torch.ones(1, 2), out_dtype=torch.bfloat16)
    except RuntimeError as e:
        pytest.skip(f"torch {torch.__version__}'s CPU _scaled_mm has no row-wise scales: {str(e)[:120]}")
    lin = linear(scheme, activation)
    for shape in ((1, 512), (5, 512), (2, 3, 512)):
        x = inputs(*shape)
        got = rowwise_mm(x, lin._parameters["weight"], getattr(lin, lin.scale_key), lin.bias,
                         getattr(lin, "input_scale", None))
        assert got.shape == (*shape[:-1], 384) and got.dtype == torch.bfloat16
        assert close(got, lin._reference(x)), shape


def contract_scaled_mm(a, b, scale_a, scale_b, out_dtype, **_):
    """torch._scaled_mm with 1x128 activation and 128x128 weight block scales as ScaledBlas.cpp checks them
    (is_blockwise_1x128_scaling on a; is_blockwise_128x128_scaling on b.t() and scale_b.t()) and cuBLAS reads
    them (scale_a's columns 16 bytes apart: M a multiple of 4; scale_b's rows round_up(K/128, 4) floats apart, so
    with torch's unpadded check K/128 a multiple of 4: pytorch PR 166752), computed in float32 on the CPU."""
    m, k = a.shape
    n = b.shape[1]
    kb, nb = -(-k // 128), -(-n // 128)
    assert a.dtype == b.dtype == FP8 and scale_a.dtype == scale_b.dtype == torch.float32
    assert b.t().is_contiguous(), "b: the weight [N, K] as stored, transposed"
    assert scale_a.shape == (m, kb) and scale_a.stride(0) == 1 and (kb == 1 or scale_a.stride(1) == m), \
        f"scale_a {tuple(scale_a.shape)} strides {scale_a.stride()}: [M, K/128] outer-dim-major"
    sb = scale_b.t()
    assert sb.shape == (nb, kb) and (nb == 1 or sb.stride(0) == kb) and (kb == 1 or sb.stride(1) == 1), \
        f"scale_b.t() {tuple(sb.shape)} strides {sb.stride()}: [N/128, K/128] row-major"
    padded = -(-kb // 4) * 4   # cuBLAS's BLK128x128_32F layout: each of the nb rows round_up(kb, 4) floats apart
    assert nb == 1 or sb.stride(0) == padded, f"cuBLAS reads scale_b's rows {padded} apart, torch passed {kb}"
    assert m % 4 == 0, "cuBLAS: scale_a's leading dimension 16-byte aligned"
    a_full = a.float() * scale_a.repeat_interleave(128, 1)[:, :k]
    b_full = b.float() * scale_b.repeat_interleave(128, 0)[:k].repeat_interleave(128, 1)[:, :n]
    return (a_full @ b_full).to(out_dtype)


@pytest.mark.parametrize("shape", [(1, 512), (5, 512), (8, 512), (2, 3, 512)])
def test_block_mm_lays_its_scales_out_as_torchs_contract_reads_them(monkeypatch, shape):
    """block_mm's arguments, read by the contract torch's block-scaled _scaled_mm states (emulated: the CPU has
    no such kernel), give the reference path's output for token counts that are and are not multiples of 4."""
    monkeypatch.setattr(torch, "_scaled_mm", contract_scaled_mm)
    lin = linear("block", "dynamic")
    x = inputs(*shape)
    got = block_mm(x, lin._parameters["weight"], lin.weight_scale_inv, lin.bias, 128)
    assert got.shape == (*shape[:-1], 384) and close(got, lin._reference(x))


def test_a_linear_keeps_a_native_product_that_agrees_on_the_probe(monkeypatch):
    """A block linear asked on "CUDA" tries the native product on the probe once, keeps it, and then computes every
    input with it: the reference path's output (to bf16 roundings)."""
    monkeypatch.setattr(quant, "native_ok", lambda x: True)
    calls = []
    monkeypatch.setattr(torch, "_scaled_mm", lambda a, *r, **k: calls.append(a.shape) or contract_scaled_mm(a, *r, **k))
    lin = linear("block", "dynamic")
    x = inputs(3, 512)
    assert close(lin(x), lin._reference(x))
    assert calls == [(8, 512), (4, 512)]   # the probe's 5 tokens, then x's 3, padded to multiples of 4
    assert fp8_kernels.VERDICTS == {lin._kind(x): True}
    assert "block 128x128 384x512 +bias (dynamic inputs, bfloat16, cpu)" == lin._kind(x)
    lin(inputs(6, 512))
    assert len(calls) == 3   # no second probe


@pytest.mark.parametrize("kernel, why", [
    (lambda *a, **k: (_ for _ in ()).throw(RuntimeError("CUDA 12.9 and above")), "raised RuntimeError: CUDA 12.9"),
    (lambda a, b, scale_a, scale_b, out_dtype: contract_scaled_mm(a, b, scale_a.flip(0), scale_b, out_dtype),
     "differed from the reference path by")])
def test_a_native_product_that_fails_or_disagrees_is_dropped_once_and_logged(monkeypatch, caplog, kernel, why):
    """A kernel that raises (a torch built for CUDA 12.8) or computes something else (scales read in another
    order): the linear computes the reference path, says why once, and never asks the kernel again."""
    monkeypatch.setattr(quant, "native_ok", lambda x: True)
    calls = []
    monkeypatch.setattr(torch, "_scaled_mm", lambda *a, **k: calls.append(1) or kernel(*a, **k))
    lin = linear("block", "dynamic")
    x = inputs(3, 512)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        assert torch.equal(lin(x), lin._reference(x))
        assert torch.equal(lin(x), lin._reference(x))
    assert calls == [1] and fp8_kernels.VERDICTS == {lin._kind(x): False}
    assert len(caplog.records) == 1 and why in caplog.text and "takes the reference path" in caplog.text
    assert "block 128x128 384x512" in caplog.text


def test_a_kept_product_that_raises_later_is_dropped(monkeypatch, caplog):
    """A kind kept on the probe whose kernel declines another token count: that call and every later one compute
    the reference path."""
    verdicts = fp8_kernels.VERDICTS
    verdicts["k"] = True
    def native(x):
        raise RuntimeError("no heuristic")
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        assert torch.equal(checked("k", native, lambda x: x + 1, torch.zeros(2)), torch.ones(2))
    assert verdicts == {"k": False} and "raised on a (2,) input: RuntimeError: no heuristic" in caplog.text


def test_a_product_of_another_shape_is_dropped(caplog):
    """One broadcasting against the reference's output (a row for five) does not pass for it."""
    assert not fp8_kernels.agrees("k", lambda x: x[:1], lambda x: x, torch.ones(3, 16))
    assert fp8_kernels.VERDICTS == {"k": False} and "wrote shape (1, 16) where the reference path writes (5, 16)" \
        in caplog.text


def test_no_probe_while_a_graph_is_captured_or_compiled(monkeypatch):
    """Untried while capturing or tracing (a probe syncs): the reference path, no verdict; the next eager call
    probes."""
    monkeypatch.setattr(fp8_kernels, "tracing", lambda x: True)
    native, reference = (lambda x: x * 2), (lambda x: x * 2 + 1e-3)   # agree to TOLERANCE, yet tell which ran
    assert torch.equal(checked("k", native, reference, torch.ones(3)), torch.full((3,), 2.001))
    assert fp8_kernels.VERDICTS == {}
    monkeypatch.setattr(fp8_kernels, "tracing", lambda x: False)
    assert torch.equal(checked("k", native, reference, torch.ones(3)), torch.full((3,), 2.0))
    assert fp8_kernels.VERDICTS == {"k": True}


@pytest.mark.gpu
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("scheme, activation", [("tensor", "dynamic"), ("channel", "dynamic"), ("tensor", "static"),
                                                ("block", "dynamic")])
def test_native_products_on_cuda_equal_the_reference_path(scheme, activation, fused, caplog):
    """On the GPU: each linear's output is the reference path's to bf16 roundings, whichever path checked() kept,
    with the input quantization compiled (fused) or not; row-wise scaling is kept wherever torch has _scaled_mm
    (logged in the run otherwise)."""
    lin = linear(scheme, activation).cuda()
    lin.fused = fused
    if activation == "static":
        lin.input_scale = lin.input_scale.cuda()
    for shape in ((1, 512), (5, 512), (8, 512), (2, 7, 512)):
        x = inputs(*shape).cuda()
        assert close(lin(x), lin._reference(x)), (shape, fp8_kernels.VERDICTS)
    print(fp8_kernels.VERDICTS, caplog.text)
    if scheme != "block":
        assert list(fp8_kernels.VERDICTS.values()) == [True], caplog.text


@pytest.mark.gpu
@pytest.mark.parametrize("fused", [False, True])
def test_the_block_product_is_kept_on_hopper_with_cuda_12_9(fused):
    """cuBLAS has 1x128 / 128x128 block scaling from CUDA 12.9 on SM 9.0: there the block kind must be kept (a
    False verdict would mean draftsmith lays the scales out wrong)."""
    cuda = tuple(int(p) for p in (torch.version.cuda or "0.0").split(".")[:2])
    if torch.cuda.get_device_capability() < (9, 0) or cuda < (12, 9):
        pytest.skip(f"CUDA {torch.version.cuda}, SM {torch.cuda.get_device_capability()}: no block kernel")
    lin = linear("block", "dynamic").cuda()
    lin.fused = fused   # the compiled quantization writes the scales in the strides _scaled_mm reads too
    x = inputs(4, 512).cuda()
    lin(x)
    assert fp8_kernels.VERDICTS == {lin._kind(x): True}


def test_a_block_fp8_target_on_the_native_product_decodes_as_on_the_reference_path(tmp_path, monkeypatch):
    """A FineGrainedFP8 target (128 x 128 blocks, widths multiples of 128) in bfloat16 on an emulated GPU: every
    kind of layer linear keeps the block product; its logits are as far from the float32 model's as the bf16
    reference path's are (this 2-layer random model magnifies bf16 roundings: both ~0.8 of 6.9, so neither path's
    speculative greedy decoding equals its target-only decoding token for token in bf16, near-ties apart); the
    engine's verification and decoding forwards run on it, every kind kept."""
    import draftsmith
    from draftsmith.testing import write_eagle1, write_target
    from draftsmith.testing.quant import quantize_folder

    folder = write_target(tmp_path / "t", "llama", num_hidden_layers=2, seed=1, hidden_size=512,
                          intermediate_size=512, num_attention_heads=4, num_key_value_heads=2)
    draft = write_eagle1(tmp_path / "d", folder, bias=False)
    quantize_folder(folder, r"^model\.layers\.\d+\.", scheme="block", quantization_config=True)
    ids = torch.tensor([[5, 17, 3, 88, 41, 9, 60, 2]])

    def logits(dtype):
        model = draftsmith.assemble("eagle1-llama", target=folder, draft=draft, dtype=dtype)
        with torch.no_grad():
            return model, model.target.logits(model.target(ids, torch.arange(ids.shape[1])[None])[0]).float()

    exact, reference = logits("float32")[1], logits("bfloat16")[1]
    monkeypatch.setattr(quant, "native_ok", lambda x: x.dtype == torch.bfloat16)
    calls = []
    monkeypatch.setattr(torch, "_scaled_mm", lambda *a, **k: calls.append(1) or contract_scaled_mm(*a, **k))
    model, native = logits("bfloat16")
    assert sorted(k.split(" (")[0] for k, v in fp8_kernels.VERDICTS.items() if v) == [
        "block 128x128 1024x512", "block 128x128 512x512"]   # q | k | v and gate | up; o and down
    assert len(calls) == 2 + 2 * 4   # a probe per kind, then a layer's q | k | v, o, gate | up, down
    assert (native - exact).abs().max() <= 2 * (reference - exact).abs().max()
    model.generate([[1, 2, 3], [7, 8]], max_new_tokens=10, stop=[], topk=2, steps=3, draft_tokens=6)
    assert len(calls) > 2 + 2 * 4 and all(fp8_kernels.VERDICTS.values())


@pytest.mark.parametrize("group, pad, static", [(None, 1, False), (None, 1, True), (128, 4, False)])
def test_the_compiled_input_quantization_equals_the_eager_one(monkeypatch, group, pad, static):
    """What torch.compile sees of the input quantization (traced whole, aot_eager: a graph break fails) computes the
    eager function's values in its strides: row-wise scales contiguous, block scales outer-dim-major; and the
    reference path's fake quantization likewise. A fused FP8 linear calls both compiled twins."""
    from draftsmith.components import fused

    traced = []
    monkeypatch.setattr(fused, "_compiled", lambda fn: traced.append(fn.__name__) or torch.compile(
        fn, fullgraph=True, backend="aot_eager"))
    torch._dynamo.reset()
    scale = torch.tensor([0.02]) if static else None
    for rows in (1, 5):
        x = inputs(rows, 512)
        want = fp8_kernels.quantized_inputs(x, scale, group, pad)
        got = fused.kernel(fp8_kernels.quantized_inputs, True)(x, scale, group, pad)
        bits = lambda t: t.view(torch.uint8) if t.dtype == FP8 else t   # noqa: E731
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.stride() == w.stride() and torch.equal(bits(g), bits(w))
        assert want[1].shape == (-(-rows // pad) * pad, 4 if group else 1)
        assert torch.equal(fused.kernel(fp8_kernels.fake_quantized, True)(x, scale, group),
                           fp8_kernels.fake_quantized(x, scale, group))
    lin = linear("block" if group else "tensor", "static" if static else "dynamic")
    lin.fused = True
    monkeypatch.setattr(quant, "native_ok", lambda x: True)
    monkeypatch.setattr(torch, "_scaled_mm", contract_scaled_mm if group else torch._scaled_mm)
    traced.clear()
    lin._reference(inputs(3, 512))
    assert traced == ["fake_quantized"]
    if group:   # the CPU's _scaled_mm has no row-wise kernel everywhere; the block one is emulated
        lin(inputs(3, 512))
        assert "quantized_inputs" in traced


def test_no_compiled_fp8_arithmetic_below_sm_8_9(monkeypatch):
    """triton has no e4m3 before SM 8.9 (an A100's torch.compile of the quantization fails): a fused FP8 linear
    quantizes eagerly there, compiled on SM 8.9+ and on the CPU; each device asked once."""
    asked = []
    capability = {"cap": (8, 0)}
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: asked.append(d) or capability["cap"])
    fp8_kernels.compiles_fp8.cache_clear()
    try:
        lin = linear("block", "dynamic")
        lin.fused = True
        a100 = SimpleNamespace(device=torch.device("cuda", 0))
        assert not lin._fused(a100) and not lin._fused(a100) and len(asked) == 1
        assert lin._fused(torch.zeros(1)) and "fused" in lin._kind(torch.zeros(1))
        capability["cap"] = (9, 0)
        fp8_kernels.compiles_fp8.cache_clear()
        assert lin._fused(a100)
        lin.fused = False
        assert not lin._fused(a100) and not lin._fused(torch.zeros(1)) and "fused" not in lin._kind(torch.zeros(1))
    finally:
        fp8_kernels.compiles_fp8.cache_clear()


def test_the_native_products_add_the_bias(monkeypatch):
    """Through zero weights a product is its bias, exactly (the other tests' outputs dwarf theirs), with and
    without one."""
    monkeypatch.setattr(torch, "_scaled_mm", contract_scaled_mm)
    zero = torch.zeros(384, 512).to(FP8)
    bias = torch.linspace(-3, 3, 384).to(torch.bfloat16)
    x = inputs(3, 512)
    got = block_mm(x, zero, torch.ones(3, 4), bias, 128)
    assert torch.equal(got, bias.expand(3, 384)) and not block_mm(x, zero, torch.ones(3, 4), None, 128).any()
    try:
        got = rowwise_mm(x, zero, torch.ones(384, 1), bias)
    except (RuntimeError, AssertionError):   # a CPU _scaled_mm without row-wise scales (torch 2.11)
        return
    assert torch.equal(got, bias.expand(3, 384)) and not rowwise_mm(x, zero, torch.ones(384, 1), None).any()


def test_a_capture_or_a_compile_is_tracing(monkeypatch):
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert fused.tracing(torch.zeros(1))
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: False)
    assert not fused.tracing(torch.zeros(1))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert fused.tracing(SimpleNamespace(is_cuda=True)) and not fused.tracing(torch.zeros(1))


def test_a_product_equal_to_the_reference_is_kept_even_where_both_are_zero():
    assert fp8_kernels.agrees("k", lambda x: x * 0, lambda x: x * 0, torch.ones(2, 16))
    assert fp8_kernels.VERDICTS == {}   # agrees answers; checked records
