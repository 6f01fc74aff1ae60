"""Elementwise chains that torch.compile fuses into one kernel each on CUDA: RMSNorm (alone, after a residual
add, two side by side), the rotary embedding, SwiGLU's gate. The decoding engine's index arithmetic (KV slots and
masks, tree building, verification, compaction) opts in the same way, through the pool's ``fused`` flag.

Eager PyTorch runs each of these as 2-20 small kernels per layer (float32 casts, pow, mean, rsqrt, the rotation's
halves), and at batch 1 a decode step is mostly such launches: on an H100 they took more device time than the
matrix products of a 1B model. Each function here is small and pure, so it is compiled once per dtype and shared
by every layer that calls it (seconds, not a whole-model trace); shapes that vary (the prompt length) go dynamic
after their first recompile. The eager function is the reference and the CPU path.

A module opts in with an attribute ``fused`` (False by default) that :func:`fuse_model` sets; it then calls
``kernel(fn, self.fused)(...)``. ``decoding.graphs`` decides (auto and compile on CUDA)."""
from __future__ import annotations

import functools
import importlib.util
from typing import Callable

import torch
from torch import nn


HALF = (torch.float16, torch.bfloat16)
RECOMPILES = 64  # variants of one function dynamo compiles before it runs the eager one (its own default: 8)


def constant_in_traces(fn: Callable) -> Callable:
    """``torch.compiler.assume_constant_result(fn)`` without importing torch._dynamo (~2 s of every command's start,
    as backends.sdpa notes): the mark that decorator sets on ``fn`` (tests/components/test_constant_in_traces.py
    checks it is the same); a trace then calls ``fn`` once, in Python, and takes its result as a constant."""
    fn._dynamo_marked_constant = True
    return fn


@functools.cache
def _compiled(fn: Callable) -> Callable:
    # not fullgraph: past dynamo's recompile limit a call runs the eager function instead of failing. The
    # functions themselves have no graph break (tests/components/test_fused.py traces them with fullgraph=True).
    allow_recompiles()
    return torch.compile(fn)


def allow_recompiles() -> None:
    """Raise dynamo's recompile limit to :data:`RECOMPILES`, process-wide and never lowered (as TensorRT-LLM's
    torch-compile backend raises it). Each shape class is a variant (batch 1 or more, one token or more, a tree
    level of 1 or k nodes, a prompt whose length equals another size): a process that decodes at batch 1 and 8
    with a chain and two trees compiles up to 8 variants of kv_index (tests/decoding/test_fused_step.py)."""
    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, RECOMPILES)


def tracing(x: torch.Tensor) -> bool:
    """Whether torch.compile traces or a CUDA graph captures ``x``'s work: no sync, no measurement then."""
    return torch.compiler.is_compiling() or (x.is_cuda and torch.cuda.is_current_stream_capturing())


def kernel(fn: Callable, fused: bool) -> Callable:
    """``fn`` itself, or its compiled twin (one per function, shared by every caller)."""
    return _compiled(fn) if fused else fn


def wanted(setting: str, device: str | torch.device) -> bool:
    """``decoding.graphs`` compile fuses on CUDA, auto too where triton is installed (torch.compile's CUDA
    backend); on / off, and every CPU run, keep the eager functions."""
    if torch.device(device).type != "cuda":
        return False
    return setting == "compile" or (setting == "auto" and importlib.util.find_spec("triton") is not None)


def fuse_model(module: nn.Module, on: bool = True) -> int:
    """Switch every module that has a ``fused`` flag; returns how many were switched."""
    n = 0
    for m in module.modules():
        if isinstance(getattr(m, "fused", None), bool):
            m.fused = on
            n += 1
    return n


# --- the fused functions (the eager reference is the same code) --------------------------------------------
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # x: [..., D] -> [..., D]; half-precision inputs are normalised in float32 and cast back before the weight
    # (transformers' order). Otherwise torch's own op, one call where the formula is five: the same bits
    # (tests/components/test_fused.py), and a quarter of a small model's CPU forward was such calls
    dtype = x.dtype
    if dtype not in HALF and weight.dtype == dtype:
        return torch.nn.functional.rms_norm(x, x.shape[-1:], weight, eps)
    h = x.to(torch.float32) if dtype in HALF else x
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)


def add_rms_norm(x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float):
    # a residual add and the RMSNorm after it: x, delta [..., D] -> (x + delta, rms_norm(x + delta))
    h = x + delta
    return h, rms_norm(h, weight, eps)


def rms_norm_cat(a: torch.Tensor, wa: torch.Tensor, ea: float, b: torch.Tensor, wb: torch.Tensor, eb: float):
    # two RMSNorms side by side: a, b [..., D] -> (cat(rms_norm(a), rms_norm(b)) [..., 2D], rms_norm(b))
    nb = rms_norm(b, wb, eb)
    return torch.cat((rms_norm(a, wa, ea), nb), dim=-1), nb


def cat_sums(parts: list[tuple[torch.Tensor, torch.Tensor | None]]) -> torch.Tensor:
    # [(x, pending)], each [..., D] -> cat(x + pending) [..., len(parts) * D] (x alone where pending is None): the
    # taps of a stack whose layers leave their last residual add pending (assembler.models.run_layers)
    return torch.cat([x if pending is None else x + pending for x, pending in parts], dim=-1)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(gate) * up


def gelu_tanh_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    # transformers' gelu_pytorch_tanh (GeGLU: Gemma's MLPs)
    return torch.nn.functional.gelu(gate, approximate="tanh") * up


def rotate_neox(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [B, T, H, d]; pairs are (i, i + d/2)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rotate_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [B, T, H, d]; pairs are (2i, 2i + 1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)


def rope_angles(pos: torch.Tensor, inv_freq: torch.Tensor, scale: float,
                dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    # pos: [B, T] -> cos, sin [B, T, 1, r/2] (r: the rotated width of a head): angles in float32, scaled (yarn,
    # longrope: an attention scaling; a scale of 1 multiplies nothing), cast to the rotated tensors' dtype
    ang = pos.to(torch.float32)[..., None] * inv_freq                        # [B, T, d/2]
    cos, sin = ang.cos(), ang.sin()
    if scale != 1.0:
        cos, sin = cos * scale, sin * scale
    return cos.to(dtype)[:, :, None], sin.to(dtype)[:, :, None]


def rotate_qk(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # q: [B, T, Hq, d], k: [B, T, Hk, d], cos, sin: [B, T, 1, r/2] -> rotated q, k: their heads in one rotation.
    # r < d (a partial rotary factor, Phi-3's): the first r channels of each head rotate, the rest pass as they are
    # (transformers' apply_rotary_pos_emb: its rotary width is cos's)
    rot = rotate_interleaved if interleaved else rotate_neox
    qk, r = torch.cat((q, k), dim=2), 2 * cos.shape[-1]
    if r < qk.shape[-1]:
        qk = torch.cat((rot(qk[..., :r], cos, sin), qk[..., r:]), dim=-1)
    else:
        qk = rot(qk, cos, sin)
    return qk.split((q.shape[2], k.shape[2]), dim=2)


def rope(q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor, scale: float,
         interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # q: [B, T, Hq, d], k: [B, T, Hk, d], pos: [B, T] -> rotated q, k (the angles and the rotation in one)
    return rotate_qk(q, k, *rope_angles(pos, inv_freq, scale, q.dtype), interleaved)


def rope_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor,
            scale: float, interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # rope, and the row a KV cache stores: q [B, T, Hq, d], k, v [B, T, Hk, d] -> rotated q, kv [B, T, 2, Hk, d]
    # (the fused form: one kernel computes its layer's angles, cheaper on CUDA than a launch more to share them)
    return rotate_kv(q, k, v, *rope_angles(pos, inv_freq, scale, q.dtype), interleaved)


def stack_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # rope_kv without the rotation (a NoPE layer's, rope.NoRotation): q as it is, kv [B, T, 2, Hk, d]
    return q, torch.stack((k, v), dim=2)


def rotate_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # rope_kv at given angles cos, sin [B, T, 1, d/2] (the eager form: the layers of a forward share them)
    q, k = rotate_qk(q, k, cos, sin, interleaved)
    return q, torch.stack((k, v), dim=2)
