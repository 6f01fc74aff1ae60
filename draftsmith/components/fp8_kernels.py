"""The arithmetic of FP8 inputs, and the native CUDA products of draftsmith's FP8 linears.

Every FP8 linear has a reference path (:mod:`draftsmith.components.quant`): its inputs fake-quantized as the
kernels quantize them (:func:`input_scales`, :func:`fake_quantize`), then the matmul with the dequantized weight.
On CUDA, with bfloat16 inputs (:func:`native_ok`), two native products replace it:

- :func:`rowwise_mm`: per-tensor or per-channel weight scales, inputs per token (dynamic) or with a static scale:
  ``torch._scaled_mm`` with row-wise scales;
- :func:`block_mm`: 128 x 128 block weight scales, inputs per token and group of 128 channels (DeepSeek-V3,
  FineGrainedFP8, llm-compressor's FP8_BLOCK): ``torch._scaled_mm`` with 1x128 and 128x128 block scales (cuBLAS
  12.9+ on SM 9.0+, torch 2.9+), which read the fp8 weight as stored instead of a dequantized copy per forward.

Whether a torch build, a GPU and a shape have such a kernel, and lay its scales out as draftsmith does, is not
assumed: :func:`checked` runs each kind of native product once (per device, dtype, settings and weight shape, on a
fixed probe input, outside any graph capture) beside the reference path, and keeps it only where it ran and
agreed to :data:`TOLERANCE` of the output's magnitude; otherwise it logs why once and that kind takes the reference
path from then on (:data:`VERDICTS` records each). A kernel that raises later, on an input the probe did not
cover, is dropped the same way. So a missing or mis-laid kernel costs speed, never a token.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Hashable

import torch
from torch.nn import functional as F

from draftsmith.components.fused import kernel, tracing
from draftsmith.errors import short_text

log = logging.getLogger("draftsmith")

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max
TOLERANCE = 0.02   # |native - reference| <= this x max |reference| on the probe (bf16 roundings differ: ~0.004)
PROBE_ROWS = 5     # tokens of the probe input: not a multiple of 4, so block_mm's row padding is exercised
VERDICTS: dict[Hashable, bool] = {}   # a native product's key -> whether it ran and agreed (absent: not yet tried)


def to_fp8(x: torch.Tensor) -> torch.Tensor:
    """e4m3 values of float32 ``x``, clamped to +-448 first (what the cast does past it is left to no torch version)."""
    return x.clamp(-FP8_MAX, FP8_MAX).to(FP8)


def input_scales(x: torch.Tensor, input_scale: torch.Tensor | None, group: int | None = None) -> torch.Tensor:
    """[..., n] float32 scales of ``x``'s tokens: the static ``input_scale`` for each (n = 1), or (None) the max-abs
    / 448 of each token's groups of ``group`` consecutive channels (dynamic; n = width / group, the whole token when
    ``group`` is None; clamped away from 0 for a group of zeros)."""
    if input_scale is not None:
        return input_scale.to(torch.float32).reshape(1).expand(*x.shape[:-1], 1)
    width = x.shape[-1]
    if group is not None and width % group:
        raise ValueError(f"an input {width} wide is no whole number of {group}-channel groups")
    amax = x.abs().unflatten(-1, (-1, group or max(width, 1))).amax(-1)   # [..., n]
    return (amax.to(torch.float32) / FP8_MAX).clamp(min=1e-12)


def quantize_inputs(x: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """e4m3(x / s): ``x`` [..., width] in groups of width / n channels, ``scales`` [..., n] (:func:`input_scales`)."""
    s = scales.to(torch.float32).unsqueeze(-1)                              # [..., n, 1]
    return to_fp8(x.to(torch.float32).unflatten(-1, (s.shape[-2], -1)) / s).flatten(-2)


def fake_quantize(x: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``x`` as an fp8 activation quantizer leaves it: e4m3(x / s) * s with ``scales`` [..., n] from
    :func:`input_scales`, one per group of width / n channels (float32 maths, x's dtype)."""
    s = scales.to(torch.float32).unsqueeze(-1)                              # [..., n, 1]
    q = quantize_inputs(x, scales).to(torch.float32).unflatten(-1, (s.shape[-2], -1))
    return (q * s).flatten(-2).to(x.dtype)


@functools.cache
def compiles_fp8(device: torch.device) -> bool:
    """Whether torch.compile can write e4m3 values on ``device``: triton has the type from SM 8.9 on (an A100's
    compile fails, pytorch issue 167082); the CPU's C++ backend has it."""
    return device.type != "cuda" or torch.cuda.get_device_capability(device) >= (8, 9)


def native_ok(x) -> bool:
    """Whether a native product may compute a native linear's input ``x``: on CUDA, in bfloat16, where torch has
    ``_scaled_mm``. Its row-wise and block scales write a bfloat16 output on every GPU, other dtypes only on some
    (cuBLAS 12.9 on SM 9.0+; fp16 in recent torch): any other input takes the reference path, the same maths."""
    return x.is_cuda and x.dtype == torch.bfloat16 and hasattr(torch, "_scaled_mm")


def quantized_inputs(x2: torch.Tensor, input_scale: torch.Tensor | None, group: int | None,
                     pad: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 inputs [M', K], float32 scales) of ``x2`` [M, K] (:func:`input_scales`), M' = M padded with zero rows
    to a multiple of ``pad``: scales [M', 1] contiguous (per token or static), or with ``group`` [M', K / group]
    outer-dim-major (a group's tokens adjacent), as ``_scaled_mm`` reads them. One fused kernel on CUDA."""
    x2 = F.pad(x2, (0, 0, 0, -x2.shape[0] % pad))
    s = input_scales(x2, input_scale, group)
    return quantize_inputs(x2, s), (s.t().contiguous().t() if group else s.contiguous())


def fake_quantized(x: torch.Tensor, input_scale: torch.Tensor | None, group: int | None) -> torch.Tensor:
    """The reference path's inputs: ``x`` fake-quantized per token, group or static scale (one fused kernel on
    CUDA)."""
    return fake_quantize(x, input_scales(x, input_scale, group))


def rowwise_mm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None,
               input_scale: torch.Tensor | None = None, fused: bool = False) -> torch.Tensor:
    """fp8 x fp8: activations quantized per token (dynamic) or with ``input_scale`` (static), weight scales per
    tensor or per channel. ``fused``: the input quantization compiled (components.fused)."""
    shape = x.shape
    xq, x_scale = kernel(quantized_inputs, fused)(x.reshape(-1, shape[-1]), input_scale, None)   # [M, K], [M, 1]
    ws = w_scale.to(torch.float32).reshape(1, -1).expand(1, w.shape[0]).contiguous()            # [1, N]
    out = torch._scaled_mm(xq, w.t(), scale_a=x_scale, scale_b=ws, out_dtype=x.dtype)
    out = out + bias if bias is not None else out
    return out.reshape(*shape[:-1], w.shape[0])


def block_mm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None,
             group: int, fused: bool = False) -> torch.Tensor:
    """fp8 x fp8 with block scales: activations per token and group of ``group`` (128) channels, the weight's
    ``w_scale`` [ceil(N/128), ceil(K/128)] as stored. torch reads the activation scales [M, K/128] outer-dim-major
    and the weight's as their transpose; cuBLAS wants those scale columns 16-byte aligned, so the tokens are padded
    to a multiple of 4 (zero rows, dropped after)."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    xq, x_scale = kernel(quantized_inputs, fused)(x2, None, group, 4)                          # [M4, K], [M4, K/128]
    out = torch._scaled_mm(xq, w.t(), scale_a=x_scale, scale_b=w_scale.float().t(),
                           out_dtype=x.dtype)[:x2.shape[0]]                                     # [M, N]
    out = out + bias if bias is not None else out
    return out.reshape(*shape[:-1], w.shape[0])


Product = Callable[[torch.Tensor], torch.Tensor]


def checked(key: Hashable, native: Product, reference: Product, x: torch.Tensor) -> torch.Tensor:
    """``native(x)`` where this kind of product (``key``) ran and agreed with ``reference`` on the probe, else
    ``reference(x)``. The first call of a kind runs the probe, unless a CUDA graph is being captured or torch.compile
    traces (the reference path then, untried: a graph's warm-up runs call it eagerly first)."""
    verdict = VERDICTS.get(key)
    if verdict is None:
        if tracing(x):
            return reference(x)
        verdict = VERDICTS[key] = agrees(key, native, reference, x)
    if not verdict:
        return reference(x)
    try:
        return native(x)
    except RuntimeError as e:   # an input the probe did not cover (a token count cuBLAS declines)
        drop(key, f"raised on a {tuple(x.shape)} input: {type(e).__name__}: {short_text(str(e), 300)}")
        return reference(x)


def agrees(key: Hashable, native: Product, reference: Product, x: torch.Tensor) -> bool:
    """Whether ``native`` runs on a probe shaped like ``x``'s tokens and agrees with ``reference`` there (logged
    when not). The probe's values span 2^-8..2^8 in magnitude, so tokens and groups take different scales."""
    gen = torch.Generator(device=x.device).manual_seed(0)
    shape = (PROBE_ROWS, x.shape[-1])
    spread = torch.exp2(torch.randint(-8, 9, shape, generator=gen, device=x.device).to(torch.float32))
    probe = (torch.randn(shape, generator=gen, device=x.device) * spread).to(x.dtype)
    try:
        got = native(probe).to(torch.float32)
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
        return drop(key, f"raised {type(e).__name__}: {short_text(str(e), 300)}")
    want = reference(probe).to(torch.float32)
    if got.shape != want.shape:
        return drop(key, f"wrote shape {tuple(got.shape)} where the reference path writes {tuple(want.shape)}")
    err, size = (got - want).abs().max().item(), want.abs().max().item()
    if not err <= TOLERANCE * size:   # NaN too
        return drop(key, f"differed from the reference path by {err:.3g} (its largest output: {size:.3g})")
    return True


def drop(key: Hashable, why: str) -> bool:
    VERDICTS[key] = False
    log.warning("FP8 native product %s %s; this kind takes the reference path (dequantized weight) from now on",
                key, why)
    return False
