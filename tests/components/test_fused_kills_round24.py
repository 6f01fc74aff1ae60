"""Kills for components/fused.py survivors (round 24): tracing() (what gemv and the fp8 probes ask before they
measure), rms_norm's epsilon in the float32 formula, and a weight of another dtype than the input."""
import pytest
import torch

from draftsmith.components import fused


class CudaLike:
    """A stand-in for a CUDA tensor on a machine without CUDA: tracing() reads only ``is_cuda``."""
    is_cuda = True


def test_a_cpu_tensor_outside_torch_compile_is_not_traced():
    """tracing() asks the CUDA graph state only for a CUDA tensor: a CPU tensor is never "being captured" (and a
    CPU-only torch, whose is_current_stream_capturing raises, is never asked)."""
    assert fused.tracing(torch.ones(2)) is False


@pytest.mark.parametrize("capturing", [False, True])
def test_a_cuda_tensor_is_traced_only_while_a_graph_is_captured(monkeypatch, capturing):
    """Outside torch.compile a CUDA tensor counts as traced exactly while its stream captures a CUDA graph: the
    gemv and fp8 probes (which sync and time) run on every other CUDA call."""
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing)
    assert fused.tracing(CudaLike()) is capturing


def test_a_capturing_stream_does_not_make_a_cpu_tensor_traced(monkeypatch):
    """A graph captured on the CUDA stream says nothing about a CPU tensor's work."""
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert fused.tracing(torch.ones(2)) is False


def test_a_cpu_tensor_is_traced_inside_torch_compile():
    """While torch.compile traces, tracing() is true whatever the device (no sync, no measurement then)."""
    def f(x):
        return x + 1 if fused.tracing(x) else x - 1

    x = torch.zeros(3)
    assert torch.equal(f(x), x - 1)
    assert torch.equal(torch.compile(f, backend="eager", fullgraph=True)(x), x + 1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_rms_norm_of_zeros_is_zeros(dtype):
    """eps is added to the mean square (rsqrt(ms + eps)): a zero row stays zero, never NaN."""
    out = fused.rms_norm(torch.zeros(2, 8, dtype=dtype), torch.ones(8, dtype=dtype), 1e-6)
    assert torch.equal(out, torch.zeros(2, 8, dtype=dtype)), out


def test_half_rms_norm_adds_a_large_eps():
    """With an eps comparable to the mean square, the formula's + eps shows (as transformers' LlamaRMSNorm)."""
    x = torch.full((1, 4), 0.5, dtype=torch.bfloat16)             # mean square 0.25
    out = fused.rms_norm(x, torch.ones(4, dtype=torch.bfloat16), 0.75)   # 0.5 / sqrt(0.25 + 0.75) = 0.5
    assert torch.equal(out, x), out


def test_a_float32_input_with_a_float64_weight_promotes_as_transformers_does():
    """A weight of another dtype than a float32 input takes the formula, weight * normed.to(input dtype), whose
    result torch promotes (float64 here, as transformers' LlamaRMSNorm returns), not torch's fused op (which keeps
    the input's float32)."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    ref = LlamaRMSNorm(8, eps=1e-6).double()
    with torch.no_grad():
        ref.weight.copy_(torch.linspace(0.5, 1.5, 8, dtype=torch.float64))
        want = ref(x)
    got = fused.rms_norm(x, ref.weight.detach(), 1e-6)
    assert want.dtype == got.dtype == torch.float64
    assert torch.equal(got, want)
