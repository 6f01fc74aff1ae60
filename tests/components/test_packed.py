"""oneDNN-prepacked CPU weights (``decoding.linear``): the packed matmul equals ``F.linear`` up to rounding, follows
in-place weight updates, steps aside for autograd, and a packed model decodes exactly what a plain one does."""

import types

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import draftsmith
from draftsmith.components import packed
from draftsmith.components.fusion import Eagle3Fusion



def _onednn_linear_runs() -> bool:
    # whether this build can reorder and run a oneDNN linear, found by trying (not by asking packed.available)
    try:
        w = torch.ops.mkldnn._reorder_linear_weight(torch.ones(2, 2), None)
        return bool(torch.ops.mkldnn._linear_pointwise(torch.ones(2, 2), w, None, "none", [], "").eq(2).all())
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


pytestmark = pytest.mark.skipif(not _onednn_linear_runs(), reason="this torch build has no oneDNN linear")


def packed_linear(inp=48, out=80, bias=True, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    lin = nn.Linear(inp, out, bias=bias).to(dtype).requires_grad_(False)
    assert packed.pack_linears(lin) == [""]
    return lin


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("shape", [(1, 48), (17, 48), (2, 5, 48)])
@pytest.mark.parametrize("bias", [True, False])
def test_packed_matmul_equals_f_linear(dtype, tol, shape, bias):
    lin = packed_linear(bias=bias, dtype=dtype)
    x = torch.randn(shape).to(dtype)
    out = lin(x)
    assert out.shape == (*shape[:-1], 80) and out.dtype == dtype
    torch.testing.assert_close(out.float(), F.linear(x, lin.weight, lin.bias).float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype,rows,threads,packed_path", [
    (torch.float32, 1, 1, False), (torch.float32, 2, 1, True), (torch.float32, 1, 2, True),
    (torch.bfloat16, 1, 1, torch.bfloat16 in packed.dtypes())])
def test_one_float32_row_on_one_thread_takes_the_gemv(monkeypatch, dtype, rows, threads, packed_path):
    lin = packed_linear(dtype=dtype)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    calls = []
    monkeypatch.setattr(packed.PackedWeight, "repack", lambda self: calls.append(1) or None)
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda x, *a: torch.zeros(*x.shape[:-1], 80))
    out = lin(torch.randn(1, rows, 48).to(dtype))
    assert bool(calls) is packed_path and bool(out.abs().sum() == 0) is packed_path


def test_a_cpu_without_onednn_bf16_keeps_bfloat16_weights_on_f_linear(monkeypatch):
    # an AVX2-only CPU (oneDNN refuses the bf16 reorder there): bfloat16 weights take F.linear, float32 still packs
    real = torch.ops.mkldnn._reorder_linear_weight

    def reorder(w, *args):
        if w.dtype == torch.bfloat16:
            raise RuntimeError("mkldnn_reorder_linear_weight: bf16 path needs the cpu support avx_ne_convert or ...")
        return real(w, *args)

    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", reorder)
    packed.dtypes.cache_clear()
    try:
        assert packed.dtypes() == (torch.float32,)
        lin = packed_linear(dtype=torch.bfloat16)
        x = torch.randn(3, 48).to(torch.bfloat16)
        assert lin._packed is None and torch.equal(lin(x), F.linear(x, lin.weight, lin.bias))
        assert packed_linear()._packed is not None
    finally:
        monkeypatch.undo()
        packed.dtypes.cache_clear()


def test_an_in_place_weight_update_repacks():
    lin = packed_linear()
    x = torch.randn(3, 48)
    lin(x)
    lin.weight.mul_(-2)                       # what an optimizer step or load_state_dict does
    torch.testing.assert_close(lin(x), F.linear(x, lin.weight, lin.bias))
    lin.weight = nn.Parameter(torch.randn(80, 48), requires_grad=False)   # a new tensor
    torch.testing.assert_close(lin(x), F.linear(x, lin.weight, lin.bias))


def test_a_write_through_data_is_not_seen_until_the_packed_copies_are_forgotten():
    # .data has its own version counter (autograd is not told), so the copy goes stale: documented, and
    # forget_packed rebuilds every copy under a module at its next call
    lin = packed_linear()
    x = torch.randn(3, 48)
    lin(x)
    lin.weight.data.copy_(torch.randn(80, 48))
    assert not torch.allclose(lin(x), F.linear(x, lin.weight, lin.bias), atol=1e-3)   # stale, as documented
    packed.forget_packed(nn.Sequential(nn.ReLU(), lin))
    torch.testing.assert_close(lin(x), F.linear(x, lin.weight, lin.bias))


def test_autograd_and_autocast_take_the_plain_path():
    lin = packed_linear().requires_grad_(True)
    x = torch.randn(4, 48)
    lin(x).sum().backward()          # the oneDNN op has no backward: this raises if it ran
    torch.testing.assert_close(lin.weight.grad, x.sum(0).expand(80, 48))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert lin(x).dtype == torch.bfloat16      # autocast's bf16 matmul, not the float32 packed one
    with torch.no_grad():
        lin.weight.add_(1.0)                       # a training step, then inference: packed again, current
        torch.testing.assert_close(lin(x), F.linear(x, lin.weight, lin.bias))


def test_only_plain_linears_are_packed():
    block = nn.ModuleDict({"lin": nn.Linear(8, 8), "fc": Eagle3Fusion(8, 8, (0, 1), False), "norm": nn.LayerNorm(8)})
    assert packed.pack_linears(block) == ["lin"]
    assert isinstance(block["lin"], nn.Linear) and type(block["fc"]) is Eagle3Fusion
    assert type(block["lin"]).__name__ == "PackedLinear"


@pytest.mark.parametrize("setting,device,want", [("auto", "cpu", ["big"]), ("packed", "cpu", ["big", "small"]),
                                                 ("plain", "cpu", []), ("auto", "cuda", [])])
def test_setting(setting, device, want):
    block = nn.ModuleDict({"big": nn.Linear(256, 256), "small": nn.Linear(255, 256)})   # 2^16 and just under
    assert packed.pack_model(block, setting, device) == want


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_packed_and_plain_models_decode_the_same_tokens(dtype):
    spec = draftsmith.load_spec("demo")
    fast = draftsmith.assemble(spec.with_decoding(linear="packed"), dtype=dtype)   # the toy's are all small
    plain = draftsmith.assemble(spec.with_decoding(linear="plain"), dtype=dtype)
    names = [n for n, m in fast.target.named_modules() if isinstance(m, packed.PackedWeight)]
    assert "lm_head" in names and not any(isinstance(m, packed.PackedWeight) for m in plain.target.modules())
    prompts = ["def fib(n):", "import os\n", "class A:"]
    for p in prompts:
        a = fast.generate(p, max_new_tokens=24)
        assert a.token_ids == fast.generate_baseline(p, max_new_tokens=24).token_ids   # lossless on the fast path
        if dtype == "float32":   # bf16 rounding differs between the kernels, so near-ties may flip there
            assert a.token_ids == plain.generate(p, max_new_tokens=24).token_ids


def test_available_where_the_ops_run_and_not_where_mkldnn_is_off_or_an_op_is_missing(monkeypatch):
    assert packed.available()                     # this module runs only where the ops were seen to work
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert not packed.available() and not packed.wanted("packed", "cpu")
    monkeypatch.undo()
    monkeypatch.setattr(torch, "ops", types.SimpleNamespace(mkldnn=types.SimpleNamespace(_linear_pointwise=None)))
    assert not packed.available()                 # the reorder op missing
    monkeypatch.setattr(torch, "ops", types.SimpleNamespace())
    assert not packed.available()                 # no mkldnn namespace at all


def test_pack_linears_prepacks_cpu_weights_of_the_packed_dtypes_at_once():
    lin = packed_linear()                         # float32 on CPU: packed when packed, not in the first call
    assert lin._packed is not None and lin._packed_key == (lin.weight.data_ptr(), torch.float32, lin.weight._version)


@pytest.mark.parametrize("make", [lambda: nn.Linear(48, 80).double(), lambda: nn.Linear(48, 80).half(),
                                  lambda: nn.Linear(48, 80, device="meta")], ids=["float64", "float16", "meta"])
def test_weights_onednn_cannot_take_stay_plain(make):
    # oneDNN's CPU linear has no float64 (float16 is not measured) and no meta kernel: such a Linear is given the
    # packed class (a later .to() may make it packable) but never reordered, and computes F.linear
    lin = make().requires_grad_(False)
    assert packed.pack_linears(lin) == [""] and lin._packed is None
    x = torch.randn(3, 48, dtype=lin.weight.dtype, device=lin.weight.device)
    with torch.no_grad():
        out = lin(x)
    if out.device.type == "cpu":
        torch.testing.assert_close(out, F.linear(x, lin.weight, lin.bias))
    else:
        assert out.shape == (3, 80)


def test_a_float32_input_to_a_bfloat16_weight_takes_the_plain_path():
    lin = packed_linear(dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="dtype"):  # exactly what nn.Linear says, not a oneDNN error
        lin(torch.randn(3, 48))


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors is a no-op")
@pytest.mark.parametrize("setting", ["packed", "auto"])
def test_an_empty_linear_is_left_alone(setting):
    # a zero-element weight has nothing to pack, and oneDNN refuses to reorder one
    def block():
        return nn.ModuleDict({"empty": nn.Linear(0, 4), "big": nn.Linear(256, 256)}).requires_grad_(False)

    assert packed.pack_model(block(), setting, "cpu") == ["big"]
    block = block()
    assert packed.pack_linears(block) == ["big"]
    torch.testing.assert_close(block["empty"](torch.randn(2, 0)), block["empty"].bias.expand(2, 4))


def test_the_smallest_nonempty_linear_is_still_packed_when_asked():
    lin = nn.Linear(1, 1).requires_grad_(False)
    assert packed.pack_model(lin, "packed", "cpu") == [""] and lin._packed is not None
    x = torch.randn(3, 1)
    torch.testing.assert_close(lin(x), F.linear(x, lin.weight, lin.bias))
