"""The matrix products of a decode step on CUDA, against the bandwidth limit: separate q/k/v and gate/up products
(what the models run today) vs one q|k|v and one gate|up product (gpt-fast's wqkv / w13), M = 1, 8, 32 rows.

    python benchmarks/bench_gemm.py [SHAPES]      # e.g. 1b,8b (CUDA only)

Every layer gets its own weights (no L2 reuse across layers) and a step's products for all layers run as one CUDA
graph, so the numbers are device time, not launch overhead. A question for issue 10 that needs no model change
to answer: at 1B the products of a decode step ran 1.23 ms against a 0.84 ms limit, the small k/v ones ~5 us each.
"""
import sys

import torch
import torch.nn.functional as F

from draftsmith.scale.timing import back_to_back_ms, captured, copy_bandwidth

SHAPES = {"1b": (2048, 8192, 32, 8, 16), "8b": (4096, 14336, 32, 8, 32)}   # hidden, inter, heads, kv heads, layers


def layer_weights(H, inter, nH, nKV, dev):
    d = H // nH
    w = lambda *s: torch.randn(*s, device=dev, dtype=torch.bfloat16) * 0.02  # noqa: E731
    q, k, v, o = w(nH * d, H), w(nKV * d, H), w(nKV * d, H), w(H, nH * d)
    g, u, down = w(inter, H), w(inter, H), w(H, inter)
    return {"separate": (q, k, v, o, g, u, down),
            "fused": (torch.cat([q, k, v]), o, torch.cat([g, u]), down)}


def step_separate(x, layers):
    for q, k, v, o, g, u, down in layers:
        a = F.linear(x, q)
        F.linear(x, k), F.linear(x, v)
        x = x + F.linear(a, o)
        x = x + F.linear(F.linear(x, g) * F.linear(x, u), down)
    return x


def step_fused(x, layers):
    for qkv, o, gu, down in layers:
        a = F.linear(x, qkv)[:, : o.shape[1]]
        x = x + F.linear(a, o)
        g, u = F.linear(x, gu).chunk(2, dim=-1)
        x = x + F.linear(g * u, down)
    return x


def timed(fn, x, iters=20) -> float:
    return back_to_back_ms(captured(lambda: fn(x), "cuda"), "cuda", rounds=1, reps=iters)


def main(shapes="1b,8b"):
    dev = "cuda"
    bw = copy_bandwidth(dev)   # the limit the scale benchmark's tables use
    print(f"copy bandwidth {bw / 1e9:.0f} GB/s")
    for name in shapes.split(","):
        H, inter, nH, nKV, L = SHAPES[name]
        layers = [layer_weights(H, inter, nH, nKV, dev) for _ in range(L)]
        nbytes = sum(t.numel() * 2 for t in layers[0]["separate"]) * L
        print(f"{name}: {L} layers, {nbytes / 1e9:.2f} GB of layer weights, limit {nbytes / bw * 1e3:.3f} ms")
        for M in (1, 8, 32):
            x = torch.randn(M, H, device=dev, dtype=torch.bfloat16)
            sep = timed(lambda x: step_separate(x, [l["separate"] for l in layers]), x)
            fus = timed(lambda x: step_fused(x, [l["fused"] for l in layers]), x)
            print(f"  M={M:2d}: separate {sep:.3f} ms ({nbytes / bw * 1e3 / sep:.2f} of the limit's speed), "
                  f"fused {fus:.3f} ms ({nbytes / bw * 1e3 / fus:.2f}), fused/separate {fus / sep:.3f}", flush=True)
        layers = None   # its memory back before the next shape's weights
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(*sys.argv[1:])
