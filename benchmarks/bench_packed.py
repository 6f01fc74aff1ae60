"""Every matmul of a target, plain ``F.linear`` against oneDNN-prepacked weights (``decoding.linear``), for T tokens
(``python benchmarks/bench_packed.py [SPEC] [THREADS]``, default the SmolLM2 pair's target on 1 thread).

A verification forward of T tokens costs the target's matmuls at M = T; a decode, at M = 1. This runs the target's
own Linear modules in model order (so the weights stream from memory as in a forward, not from cache), float32 and
bfloat16, median of 5, all in this run: ms for the whole stack, its multiple of the one-token plain stack, and
packed's speed-up at each T.
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


def main(spec: str = "smollm2", threads: int = 1) -> None:
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


if __name__ == "__main__":
    main(*(sys.argv[1:2] or ["smollm2"]), *[int(a) for a in sys.argv[2:3]])
