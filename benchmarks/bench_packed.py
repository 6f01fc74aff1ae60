"""Every matmul of a target, plain ``F.linear`` against oneDNN-prepacked weights (``decoding.linear``), for T tokens
(``python benchmarks/bench_packed.py [SPEC] [THREADS] [--compiled 1,6]``, default the SmolLM2 pair's target on 1
thread).

A verification forward of T tokens costs the target's matmuls at M = T; a decode, at M = 1. This runs the target's
own Linear modules in model order (so the weights stream from memory as in a forward, not from cache), float32 and
bfloat16, median of 5, all in this run: ms for the whole stack, its multiple of the one-token plain stack, and
packed's speed-up at each T.

``--compiled T,...``: also, in float32 at those T, the same stack compiled by torch.compile (inductor) with frozen
weights and its C++ GEMM template (``max-autotune``), the kernel a CPU matmul could have, and what compiling it
costs (per process: freezing bypasses inductor's cache), and MKL's packed product (``_mkl_linear``, packed for T
rows) and ``F.linear`` over a weight stored transposed. The README's **CPU matmul kernels** gives this run's numbers
on 2026-11-29's AVX2 EPYC (the compiled stack: a 6-token product in the time of one, after ~55 s of compiling).
"""
import sys
import time

import torch
from torch.nn import functional as F

import draftsmith
from draftsmith.components import packed
from draftsmith.components.stacked import Stacked
from draftsmith.specs.loader import load_spec

TOKENS = (1, 2, 4, 8, 12, 17, 32)


def stack_ms(linears, x_of, fn, repeats: int = 5) -> float:
    fn(linears, x_of)  # warm-up (and the one-time packing), untimed
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(linears, x_of)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def plain(linears, x_of):
    for m in linears:
        F.linear(x_of[m.in_features], m.weight, m.bias)


def prepacked(linears, x_of):
    for m in linears:
        m(x_of[m.in_features])


class _Stack(torch.nn.Module):
    """The linears in model order, as one module torch.compile can freeze: x_of maps an input width to [T, width]."""

    def __init__(self, linears):
        super().__init__()
        self.linears = torch.nn.ModuleList(torch.nn.Linear(m.in_features, m.out_features, bias=m.bias is not None)
                                           for m in linears)
        with torch.no_grad():
            for new, m in zip(self.linears, linears):
                new.weight.copy_(m.weight)
                if m.bias is not None:
                    new.bias.copy_(m.bias)

    def forward(self, x_of: dict[int, torch.Tensor]) -> list[torch.Tensor]:
        return [m(x_of[m.in_features]) for m in self.linears]


def compiled_rows(linears, tokens: list[int]) -> None:
    """float32 ms at each T: plain, packed, inductor-compiled (frozen weights, C++ GEMM template; one compile per T,
    static shapes, so each T's row pays its own, timed beside it), MKL-packed for T rows, and a transposed weight."""
    import torch._inductor.config as inductor

    inductor.freezing = True
    inductor.max_autotune_gemm_backends = "CPP"
    stack = _Stack(linears).eval()
    print(f"{'T':>3} {'plain':>9} {'packed':>9} {'compiled':>9} {'compile s':>10} {'mkl':>9} {'W^T':>9}   "
          "(float32, ms)")
    with torch.no_grad():
        x1 = {k: torch.randn(1, k) for k in {m.in_features for m in linears}}
        base = stack_ms(linears, x1, plain)
        for T in tokens:
            torch._dynamo.reset()
            x_of = {k: torch.randn(T, k) for k in x1}
            fast = torch.compile(stack, mode="max-autotune")
            t0 = time.perf_counter()
            fast(x_of)
            took = time.perf_counter() - t0
            c = stack_ms(None, x_of, lambda _, x: fast(x))
            a, b = stack_ms(linears, x_of, plain), stack_ms(linears, x_of, prepacked)
            # the two other layouts torch has: MKL's own packing for T rows, and the weight stored transposed
            mkl = [torch.ops.mkl._mkl_reorder_linear_weight(m.weight, T) for m in linears]
            m_ms = stack_ms(linears, x_of, lambda ls, x: [torch.ops.mkl._mkl_linear(x[m.in_features], p, m.weight,
                                                                                     m.bias, T)
                                                           for m, p in zip(ls, mkl)])
            wt = [m.weight.t().contiguous() for m in linears]
            t_ms = stack_ms(linears, x_of, lambda ls, x: [F.linear(x[m.in_features], w.t(), m.bias)
                                                          for m, w in zip(ls, wt)])
            print(f"{T:>3} {a:>9.1f} {b:>9.1f} {c:>9.1f} {took:>10.1f} {m_ms:>9.1f} {t_ms:>9.1f}   "
                  f"(one-token plain: {base:.1f})")


def main(spec: str = "smollm2", threads: int = 1, compiled: list[int] | None = None) -> None:
    torch.set_num_threads(threads)
    print(f"target of spec {spec!r}, {threads} thread(s): all its Linear matmuls for T tokens, ms (x one-token plain)")
    print(f"{'dtype':>9} {'T':>3} {'plain':>15} {'packed':>15} {'speed-up':>9}")
    for dtype in ("float32", "bfloat16"):
        # every Linear packed (``auto`` would leave the small ones plain and time them twice as "plain")
        model = draftsmith.assemble(load_spec(spec).with_decoding(linear="packed"), dtype=dtype)
        # in model order; a stacked q | k | v or gate | up (components/stacked.py) is one matmul, kept beside the tree
        linears = [x for m in model.target.modules() for x in [m] * isinstance(m, packed.PackedWeight) +
                   [v.linear for v in vars(m).values() if isinstance(v, Stacked)]]
        with torch.inference_mode():
            base = None
            for T in TOKENS:
                x_of = {k: torch.randn(T, k, dtype=getattr(torch, dtype)) for k in {m.in_features for m in linears}}
                a, b = stack_ms(linears, x_of, plain), stack_ms(linears, x_of, prepacked)
                base = base or a
                print(f"{dtype:>9} {T:>3} {a:>8.1f} ({a / base:4.2f}) {b:>8.1f} ({b / base:4.2f}) {a / b:>8.2f}x")
            if compiled and dtype == "float32":
                compiled_rows(linears, compiled)


if __name__ == "__main__":
    args = sys.argv[1:]
    tokens = None
    if "--compiled" in args:
        i = args.index("--compiled")
        tokens = [int(t) for t in args[i + 1].split(",")]
        del args[i:i + 2]
    main(*(args[0:1] or ["smollm2"]), *[int(a) for a in args[1:2]], compiled=tokens)
