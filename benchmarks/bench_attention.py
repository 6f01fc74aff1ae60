"""Attention backends side by side on tree-verification shapes (``python benchmarks/bench_attention.py
[DEVICE]``): one forward = build the mask structure once, then one attention call per layer. Prints ms per
forward and the ratio against SDPA with an explicit boolean mask, all measured in this run."""
import sys
import time

import torch

from draftsmith.components import backends


def tree_mask(B: int, T: int, S: int, device) -> torch.Tensor:
    # committed prefix all visible + a random tree over the last T keys (parent of node i is some j < i)
    m = torch.zeros(B, 1, T, S, dtype=torch.bool, device=device)
    m[..., : S - T] = True
    for b in range(B):
        anc = torch.eye(T, dtype=torch.bool)
        for i in range(1, T):
            anc[i] |= anc[int(torch.randint(i, ()))]
        m[b, 0, :, S - T:] = anc.to(device)
    return m


def flex_via_create_block_mask(q, k, v, mask, scale):
    # the textbook route (torch's create_block_mask evaluates the mask function over every pair), for comparison
    from torch.nn.attention.flex_attention import create_block_mask

    if not hasattr(mask, "_block"):
        m = mask[:, 0]
        mask._block = create_block_mask(lambda b, h, qi, ki: m[b, qi, ki], m.shape[0], None, m.shape[1], m.shape[2],
                                        device=q.device)
    return backends.flex_kernel(q.is_cuda)(q, k, v, block_mask=mask._block, scale=scale, enable_gqa=True,
                                           **backends._flex_options(q))


def sdpa_expanded_kv(q, k, v, mask, scale):
    # kv heads repeated so SDPA's fused memory-efficient kernel takes the masked call (it takes no enable_gqa)
    rep = q.shape[1] // k.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1),
                                                            v.repeat_interleave(rep, 1), attn_mask=mask, scale=scale)


def per_forward(fn, q, k, v, mask, layers: int, repeats: int = 20) -> float:
    def forward():
        m = None if mask is None else mask.clone()  # a new mask object per forward, as in decoding
        for _ in range(layers):
            fn(q, k, v, m, 0.088)

    for _ in range(3):
        forward()
    if q.is_cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        forward()
    if q.is_cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats * 1e3


def main(device: str = "cuda") -> None:
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    layers = 8
    print(f"{device} {dtype}, 32 query heads, 8 kv heads, head_dim 128, {layers} layers per forward")
    cols = ["sdpa+mask", "sdpa kv-expanded", "flex", "flex/cbm", "eager", "sdpa causal"]
    print(f"{'case':<22}" + "".join(f"{c:>18}" for c in cols) + "   flex / sdpa+mask")
    for B, T, S in [(1, 8, 128), (1, 8, 1024), (1, 8, 4096), (4, 8, 1024), (1, 64, 4096)]:
        q = torch.randn(B, 32, T, 128, device=device, dtype=dtype)
        k, v = (torch.randn(B, 8, S, 128, device=device, dtype=dtype) for _ in range(2))
        mask = tree_mask(B, T, S, device)
        fns = [backends.sdpa, sdpa_expanded_kv, backends.flex, flex_via_create_block_mask, backends.eager, None]
        t = [per_forward(fn or backends.sdpa, q, k, v, None if fn is None else mask, layers) for fn in fns]
        print(f"{f'B={B} T={T} S={S}':<22}" + "".join(f"{x:>16.3f}ms" for x in t) + f"   {t[2] / t[0]:.2f}x")

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ("cuda" if torch.cuda.is_available() else "cpu"))
