"""The decode step's matrix products one at a time, against the copy bandwidth: cuBLAS (``F.linear``, what the
models run) vs a hand-written Triton GEMV vs inductor's reduction of ``(x * w).sum(-1)``, at few rows.

    python benchmarks/bench_gemv.py [SHAPE] [ROWS]     # CUDA: SHAPE 8b or 1b (default 8b), ROWS e.g. 1,8
    TRITON_INTERPRET=1 python benchmarks/bench_gemv.py --check    # the CPU: the Triton kernel against F.linear
    TRITON_INTERPRET=1 python benchmarks/bench_gemv.py tiny 1,3 cpu   # the CPU: the whole run, on tiny shapes

Why (issue 10, benchmarks/results/h200.md): at 8B a target-only step's products read 0.87 of the copy bandwidth
(4.11 of 5.11 ms; o_proj and q|k|v, the small ones, at 3.1-4.1 TB/s), 0.55 ms of the 1.55 ms between the step and
the limit. This answers whether a GEMV kernel closes that before any model code changes: each product runs over
enough distinct weights (>= 512 MB) that L2 holds none of them, captured as one CUDA graph, so the time is device
time; every variant is first checked against ``F.linear`` in float32. A Triton config is picked per shape by
timing a short list (no autotuner: its compile-everything sweep would not fit a device call).
"""
from __future__ import annotations

import math
import sys

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:   # the CPU machines: nothing here runs without Triton
    triton = None

# (out, in) of a layer's products and the head, as the models stack them (q|k|v, gate|up)
SHAPES = {"8b": {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
                 "head": (128256, 4096)},
          "1b": {"qkv": (3072, 2048), "o": (2048, 2048), "gate_up": (16384, 2048), "down": (2048, 8192),
                 "head": (128256, 2048)},
          "tiny": {"o": (48, 272), "head": (100, 64)}}   # the CPU smoke run (tests/tools/test_gpu_run.py)
LAYERS = {"8b": 32, "1b": 16, "tiny": 2}
# (BLOCK_N, BLOCK_K, SPLIT_K, num_warps): rows of w per program, columns per load, programs sharing a row's
# columns (their partial sums added atomically into float32), warps
CONFIGS = [(4, 512, 1, 4), (8, 256, 1, 4), (8, 512, 1, 4), (16, 256, 1, 4), (16, 512, 1, 8), (32, 256, 1, 8),
           (8, 512, 2, 4), (16, 256, 4, 4)]

if triton is not None:
    @triton.jit
    def _gemv(x_ptr, w_ptr, y_ptr, M, N, K, steps, stride_xm, stride_wn, stride_ym,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
        # y [M, N] = x [M, K] @ w [N, K]^T, M <= BLOCK_M: program (n, s) sums w's rows n*BLOCK_N.. over the column
        # blocks s, s + SPLIT_K, ...; float32 sums, stored in y's dtype (SPLIT_K 1) or added into float32 y
        pid_n, pid_k = tl.program_id(0), tl.program_id(1)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rm = tl.arange(0, BLOCK_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for i in range(0, steps):   # steps = cdiv(K, BLOCK_K * SPLIT_K)
            rk = (i * SPLIT_K + pid_k) * BLOCK_K + tl.arange(0, BLOCK_K)
            w = tl.load(w_ptr + rn[:, None] * stride_wn + rk[None, :], mask=(rn[:, None] < N) & (rk[None, :] < K),
                        other=0.0).to(tl.float32)
            x = tl.load(x_ptr + rm[:, None] * stride_xm + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K),
                        other=0.0).to(tl.float32)
            acc += tl.sum(w[None, :, :] * x[:, None, :], axis=2)
        out = y_ptr + rm[:, None] * stride_ym + rn[None, :]
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        if SPLIT_K == 1:
            tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=mask)
        else:
            tl.atomic_add(out, acc, mask=mask)


def gemv(x: torch.Tensor, w: torch.Tensor, config=CONFIGS[2]) -> torch.Tensor:
    """x [M, K] @ w [N, K]^T -> [M, N] in x's dtype, by the Triton kernel (M <= 16)."""
    block_n, block_k, split_k, warps = config
    (M, K), N = x.shape, w.shape[0]
    # split sums are added into zeros (a memset more); one program per row block stores, so nothing to zero
    y = torch.zeros(M, N, device=x.device, dtype=torch.float32) if split_k > 1 else x.new_empty(M, N)
    grid = (triton.cdiv(N, block_n), split_k)
    extra = {} if x.device.type == "cpu" else {"num_warps": warps}
    _gemv[grid](x, w, y, M, N, K, triton.cdiv(K, block_k * split_k), x.stride(0), w.stride(0), y.stride(0),
                BLOCK_M=max(1, 1 << (M - 1).bit_length()), BLOCK_N=block_n, BLOCK_K=block_k, SPLIT_K=split_k, **extra)
    return y.to(x.dtype) if split_k > 1 else y


def reduction(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The same product as a broadcast multiply and a sum, for inductor to compile into one reduction kernel."""
    return (x[:, None, :].float() * w[None].float()).sum(-1).to(x.dtype)


def agrees(out: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> bool:
    ref = F.linear(x.float(), w.float())
    return bool(((out.float() - ref).abs().max() <= 2e-2 * ref.abs().max() + 1e-3).item())


def check() -> None:
    """The kernel against F.linear for every config, on odd shapes (masked edges) and rows 1-9 (CPU: run it with
    TRITON_INTERPRET=1)."""
    gen = torch.Generator().manual_seed(0)
    for M, N, K in ((1, 37, 300), (3, 64, 1024), (8, 50, 515), (9, 16, 256), (2, 40, 4100)):   # 4100: loops
        x, w = torch.randn(M, K, generator=gen), torch.randn(N, K, generator=gen)
        for config in CONFIGS:
            out = gemv(x, w, config)
            assert out.shape == (M, N) and agrees(out, x, w), (M, N, K, config)
    print(f"the Triton GEMV agrees with F.linear: {len(CONFIGS)} configs x 5 shapes")


def graph_ms(fn, xs, ws, reps: int = 5) -> float:
    """ms per product: fn over every weight, captured as one CUDA graph and replayed (the CPU: called)."""
    from draftsmith.scale.timing import back_to_back_ms, captured

    def products():
        for x, w in zip(xs, ws):
            fn(x, w)

    device = str(xs[0].device)
    return back_to_back_ms(captured(products, device), device, rounds=1, reps=reps) / len(ws)


def fits(config, M: int) -> bool:
    """Whether a config's product tile [BLOCK_M, BLOCK_N, BLOCK_K] in float32 stays within 16K values (64 per
    thread at 8 warps): larger ones spill registers on a GPU, which the CPU interpreter cannot show."""
    return max(1, 1 << (M - 1).bit_length()) * config[0] * config[1] <= 1 << 14


def triton_best(xs, ws, name: str, M: int):
    """(ms, config) of the fastest config that fits and agrees with F.linear, or None; a config that fails to
    compile or agree is said and skipped."""
    best = None
    for config in (c for c in CONFIGS if fits(c, M)):
        try:
            if not agrees(gemv(xs[0], ws[0], config), xs[0], ws[0]):
                print(f"  {name} M={M} {config}: WRONG, skipped")
                continue
            t = graph_ms(lambda x, w, c=config: gemv(x, w, c), xs, ws, reps=3)
        except Exception as e:   # a config Triton cannot build here (registers, shared memory): the others stand
            print(f"  {name} M={M} {config}: {type(e).__name__}: {str(e)[:120]}")
            continue
        best = min(best or (t, config), (t, config))
    return best


def main(shape: str = "8b", rows: str = "1,8", device: str = "cuda") -> None:
    from draftsmith.scale.timing import copy_bandwidth

    bw = copy_bandwidth(device)
    layers = LAYERS[shape]
    print(f"copy bandwidth {bw / 1e9:.0f} GB/s; ms per product, (x the limit's time: 1.00 = at the bandwidth)")
    print("| product | rows | limit ms | cuBLAS | Triton GEMV (config) | inductor reduction |")
    print("|---|---|---|---|---|---|")
    compiled = torch.compile(reduction, dynamic=False)
    step = {}   # rows -> [limit, cuBLAS, the best of the three] ms of a step's products ({layers} of each, one head)
    for name, (N, K) in SHAPES[shape].items():
        nbytes, count = N * K * 2, 1 if name == "head" else layers
        ws = [torch.randn(N, K, device=device, dtype=torch.bfloat16) * 0.02
              for _ in range(max(2, math.ceil(512e6 / nbytes)) if device == "cuda" else 2)]
        limit = nbytes / bw * 1e3
        for M in map(int, rows.split(",")):
            xs = [torch.randn(M, K, device=device, dtype=torch.bfloat16) for _ in ws]
            cublas = graph_ms(F.linear, xs, ws)
            best = triton_best(xs, ws, name, M)
            red, t_red = "-", None
            if M == 1:   # one compile per shape; the case
                try:
                    t_red = graph_ms(compiled, xs, ws) if agrees(compiled(xs[0], ws[0]), xs[0], ws[0]) else None
                    red = "WRONG" if t_red is None else f"{t_red:.4f} ({t_red / limit:.2f}x)"
                except Exception as e:
                    red = f"{type(e).__name__}"
            tri = "-" if best is None else f"{best[0]:.4f} ({best[0] / limit:.2f}x) {best[1]}"
            print(f"| {name} {N}x{K} | {M} | {limit:.4f} | {cublas:.4f} ({cublas / limit:.2f}x) | {tri} | {red} |",
                  flush=True)
            fastest = min(t for t in (cublas, best and best[0], t_red) if t is not None)
            totals = step.setdefault(M, [0.0, 0.0, 0.0])
            for i, t in enumerate((limit, cublas, fastest)):
                totals[i] += count * t
            print(f"  so far, {M} row(s): limit {totals[0]:.3f} ms, cuBLAS {totals[1]:.3f}, fastest {totals[2]:.3f}",
                  flush=True)   # a run cut at its limit keeps the sums of what it timed
        del ws
        if device == "cuda":
            torch.cuda.empty_cache()
    for M, (limit, cublas, fastest) in step.items():
        print(f"a step's products, {M} row(s): limit {limit:.3f} ms, cuBLAS {cublas:.3f} ms ({cublas / limit:.2f}x), "
              f"the fastest of each {fastest:.3f} ms ({fastest / limit:.2f}x): {cublas - fastest:.3f} ms to gain")


if __name__ == "__main__":
    if triton is None:
        sys.exit("bench_gemv needs triton (the CUDA machines have it)")
    check() if sys.argv[1:] == ["--check"] else main(*sys.argv[1:])
