"""The fused kernels (components/fused.py): the compiled path computes what the eager reference computes, for
every module that opts in, and the switch follows decoding.graphs and the device. On CPU the compiled twin is
traced with the aot_eager backend (fullgraph: a graph break fails), which checks what torch.compile sees without
needing a C++ or CUDA compiler; the CUDA kernels are checked by tests/gpu."""
import pytest
import torch
from transformers import LlamaConfig, Phi3Config

from draftsmith.components import fused
from draftsmith.components.mlp import SwiGLU
from draftsmith.components.norms import RMSNorm
from draftsmith.components.rope import Rotary


@pytest.fixture
def traced(monkeypatch):
    calls = []

    def compiled(fn):
        calls.append(fn.__name__)
        return torch.compile(fn, fullgraph=True, backend="aot_eager")

    monkeypatch.setattr(fused, "_compiled", compiled)
    torch._dynamo.reset()
    return calls


def modules():
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=10000.0)
    norm = RMSNorm(64, 1e-5)
    norm.weight.data.uniform_(0.5, 1.5)
    partial = Phi3Config(hidden_size=64, num_attention_heads=4, partial_rotary_factor=0.75)   # 12 of 16 channels
    return {"norm": norm, "mlp": SwiGLU(64, 96), "neox": Rotary(cfg, 16, "neox"),
            "interleaved": Rotary(cfg, 16, "interleaved"), "partial": Rotary(partial, 16, "neox", partial=True)}


def run(name, m, dtype):
    g = torch.Generator().manual_seed(1)
    if name in ("norm", "mlp"):
        return m.to(dtype)(torch.randn(2, 5, 64, generator=g).to(dtype))
    q, k = torch.randn(2, 5, 4, 16, generator=g).to(dtype), torch.randn(2, 5, 2, 16, generator=g).to(dtype)
    return torch.cat([t.flatten() for t in m(q, k, torch.arange(5).expand(2, 5) * 7)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["norm", "mlp", "neox", "interleaved", "partial"])
def test_the_fused_path_equals_the_eager_one(traced, name, dtype):
    m = modules()[name]
    want = run(name, m, dtype)
    assert fused.fuse_model(m) == 1 and m.fused
    got = run(name, m, dtype)
    assert traced, "the fused module did not call its compiled twin"
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_fuse_model_switches_every_opted_in_module():
    ms = torch.nn.ModuleList(modules().values())
    assert fused.fuse_model(ms) == 5 and all(m.fused for m in ms)
    assert fused.fuse_model(ms, False) == 5 and not any(m.fused for m in ms)


def test_the_setting_decides():
    assert not fused.wanted("auto", "cpu") and not fused.wanted("compile", "cpu")
    assert fused.wanted("compile", "cuda") and not fused.wanted("on", "cuda") and not fused.wanted("off", "cuda")


def test_assemble_leaves_cpu_models_eager():
    import draftsmith

    model = draftsmith.assemble("demo")
    flags = [m.fused for m in (*model.target.modules(), *model.draft.modules()) if hasattr(m, "fused")]
    assert flags and not any(flags)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_fused_functions_compute_the_textbook_formulas(dtype):
    # the eager functions are the reference of the compiled ones, so they are checked against torch's own RMSNorm
    g = torch.Generator().manual_seed(3)
    x, d, b = (torch.randn(2, 5, 64, generator=g).to(dtype) for _ in range(3))
    wa, wb = (torch.rand(64, generator=g).to(dtype) + 0.5 for _ in range(2))

    def ref(t, w, eps):
        return torch.nn.functional.rms_norm(t.float(), (64,), eps=eps).to(dtype) * w

    h, normed = fused.add_rms_norm(x, d, wa, 1e-5)
    torch.testing.assert_close(h, x + d, rtol=0, atol=0)
    torch.testing.assert_close(normed, ref(x + d, wa, 1e-5))
    both, nb = fused.rms_norm_cat(x, wa, 1e-5, b, wb, 1e-6)
    torch.testing.assert_close(both, torch.cat((ref(x, wa, 1e-5), ref(b, wb, 1e-6)), -1))
    torch.testing.assert_close(nb, ref(b, wb, 1e-6))


@pytest.mark.parametrize("shape", [(1, 1, 64), (2, 7, 128), (3, 576), (1, 6, 2048)])
def test_float32_rms_norm_is_torch_op_with_the_formula_bits(shape):
    # rms_norm hands float32 to torch.nn.functional.rms_norm: the same bits as the formula it replaced, so parity
    # and every float32 equality are unchanged
    g = torch.Generator().manual_seed(shape[-1])
    x, w = torch.randn(*shape, generator=g) * 3, torch.rand(shape[-1], generator=g) + 0.5
    want = w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))
    assert torch.equal(fused.rms_norm(x, w, 1e-5), want)


def test_half_rms_norm_casts_before_the_weight():
    # transformers' order for half precision: normalise in float32, cast back, then multiply by the weight in half
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(2, 5, 64, generator=g).bfloat16(), (torch.rand(64, generator=g) + 0.5).bfloat16()
    h = x.float()
    want = w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).bfloat16()
    assert torch.equal(fused.rms_norm(x, w, 1e-6), want)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_rotates_q_and_k_in_one_call_as_each_alone(interleaved):
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 3, 4, 16, generator=g), torch.randn(2, 3, 2, 16, generator=g)
    pos, inv = torch.arange(6).view(2, 3) * 5, 1.0 / 10000 ** (torch.arange(0, 16, 2) / 16)
    ang = pos.float()[..., None] * inv
    cos, sin = (ang.cos() * 0.9)[:, :, None], (ang.sin() * 0.9)[:, :, None]
    rot = fused.rotate_interleaved if interleaved else fused.rotate_neox
    got = fused.rope(q, k, pos, inv, 0.9, interleaved)
    assert [t.shape for t in got] == [q.shape, k.shape]
    assert torch.equal(got[0], rot(q, cos, sin)) and torch.equal(got[1], rot(k, cos, sin))


@pytest.mark.parametrize("style", ["neox", "interleaved", "partial"])
def test_a_fused_rotary_stores_through_its_compiled_kernel_what_the_eager_one_stores(traced, style):
    # kv_rows, fused: one compiled rope_kv per layer (angles inline); eager: the forward's shared angles
    m, g = modules()[style], torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 5, h, 16, generator=g) for h in (4, 2, 2))
    pos = torch.arange(5).expand(2, 5) * 3

    def rows():
        make, args = m.kv_rows(q, k, v, pos, {})
        return fused.kernel(make, m.fused)(*args)

    want = rows()
    assert not traced
    fused.fuse_model(m)
    got = rows()
    assert traced == ["rope_kv"]
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_the_taps_are_the_layers_inputs_added_and_joined_by_one_compiled_kernel(traced):
    """A target keeps each tap as (stream, pending add) and cat_sums adds and joins them: the taps are the settled
    inputs of the tapped layers (the output for a tap past the last), the compiled join computes the eager one's
    bits, and it is one function (one kernel on CUDA) for all of them."""
    import draftsmith

    model = draftsmith.assemble("demo")
    target, taps = model.target, list(model.draft.taps)
    layers = target.model.layers
    taps = sorted({*taps, len(layers)})            # a tap past the last layer too: the stack's output
    ids = torch.tensor([[5, 17, 99, 3, 42, 8, 61]])
    pos = torch.arange(ids.shape[1])[None]
    with torch.inference_mode():
        _, want = target(ids, pos, taps=taps)
        x, inputs = target.model.embed_tokens(ids), []
        for layer in layers:
            inputs.append(x)
            x = layer(x, pos)
        inputs.append(x)
        settled = torch.cat([inputs[i] for i in taps], dim=-1)
        assert fused.fuse_model(target) >= 1 and target.fused
        _, got = target(ids, pos, taps=taps)
    assert traced.count("cat_sums") == 1
    torch.testing.assert_close(want, settled, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    parts = [(torch.randn(2, 3, 8), torch.randn(2, 3, 8)), (torch.randn(2, 3, 8), None)]
    assert torch.equal(fused.cat_sums(parts), torch.cat([parts[0][0] + parts[0][1], parts[1][0]], -1))


@pytest.mark.parametrize("interleaved", [False, True])
def test_a_partial_rotation_turns_the_first_channels_and_passes_the_rest(interleaved):
    """Fewer frequencies than a head has pairs (a partial rotary factor): the first 2 * len(inv) channels of each
    head rotate as a head of that width would, the rest come out as they went in (transformers' Phi-3)."""
    g = torch.Generator().manual_seed(6)
    q, k = torch.randn(2, 3, 4, 16, generator=g), torch.randn(2, 3, 2, 16, generator=g)
    pos, inv = torch.arange(6).view(2, 3) * 5, 1.0 / 10000 ** (torch.arange(0, 12, 2) / 12)
    got = fused.rope(q, k, pos, inv, 1.0, interleaved)
    want = fused.rope(q[..., :12], k[..., :12], pos, inv, 1.0, interleaved)
    for out, rotated, x in zip(got, want, (q, k)):
        assert torch.equal(out[..., :12], rotated) and torch.equal(out[..., 12:], x[..., 12:])
