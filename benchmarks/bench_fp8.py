"""The FP8 linears of a decode step on CUDA, against the bandwidth limit: a step's layer products as draftsmith's
targets run them (q | k | v, o, gate | up, down: siblings stacked, components/stacked.py) for every layer, in
bfloat16 and as FP8 linears (draftsmith.components.quant) on the reference path (the weight dequantized each
forward) and on the native products fp8_kernels keeps (block 128 x 128 with inputs per group of 128, FineGrainedFP8
/ Qwen3-FP8 / DeepSeek-V3; per channel with inputs per token, FP8-dynamic).

    python benchmarks/bench_fp8.py [SHAPES] [ROWS]      # e.g. 8b 1,8 (CUDA only)

Every layer has its own weights and a step's products run as one CUDA graph, so the numbers are device time. The
limit is the step's weight bytes (2 per weight in bf16, 1 in FP8 plus its scales) / measured copy bandwidth.
"""
import sys

import torch

from bench_gemm import timed   # this folder's: a step's products as one CUDA graph, timed by events

from draftsmith.components import fp8_kernels
from draftsmith.components.quant import FP8Params, fp8_linear, quantize
from draftsmith.scale.timing import copy_bandwidth

SHAPES = {"1b": (2048, 8192, 512, 16), "8b": (4096, 14336, 1024, 32)}   # hidden, inter, kv width, layers
DEVICE = "cuda"
MODES = {"bf16": None, "fp8 block, reference": ("block", False), "fp8 block, native": ("block", True),
         "fp8 channel, native": ("channel", True)}


def layers(H, inter, kv, n, mode):
    """n layers of the four products."""
    shapes = [(H + 2 * kv, H), (H, H), (2 * inter, H), (H, inter)]   # (out, in)
    out = []
    for _ in range(n):
        layer = []
        for o, i in shapes:
            w = torch.randn(o, i, device=DEVICE) * 0.02
            lin = torch.nn.Linear(i, o, bias=False, device=DEVICE, dtype=torch.bfloat16)
            if mode is None:
                lin.weight.data = w.to(torch.bfloat16)
            else:
                scheme, native = mode
                fp8_linear(lin, FP8Params(scheme=scheme, activation="dynamic"), torch.bfloat16)
                lin._parameters["weight"].data, scale = quantize(w, scheme)
                setattr(lin, lin.scale_key, scale)
                lin.native = native
            layer.append(lin)
        out.append(layer)
    return out


def weight_bytes(model):
    return sum(t.numel() * t.element_size() for layer in model for lin in layer
               for t in (*lin.parameters(), *lin.buffers()))


def main(shapes="8b", rows="1,8"):
    gbps = copy_bandwidth("cuda") / 1e9
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"copy bandwidth {gbps:.0f} GB/s")
    for name in shapes.split(","):
        H, inter, kv, n = SHAPES[name]
        print(f"\n{name}: {n} layers | rows | ms / step | x bf16 | limit ms | x limit")
        base = {}
        for mode, setting in MODES.items():
            model = layers(H, inter, kv, n, setting)
            limit = weight_bytes(model) / gbps / 1e6
            for m in map(int, rows.split(",")):
                xh = torch.randn(m, H, device="cuda", dtype=torch.bfloat16)
                xi = torch.randn(m, inter, device="cuda", dtype=torch.bfloat16)

                def step():
                    for layer in model:
                        for lin in layer:
                            lin(xi if lin.in_features == inter else xh)
                ms = timed(lambda _: step(), xh)   # its first, eager call runs each kind's probe
                base.setdefault(m, ms)
                print(f"{mode} | {m} | {ms:.3f} | {ms / base[m]:.2f} | {limit:.3f} | {ms / limit:.2f}")
            model = None   # its memory back before the next mode's weights
            torch.cuda.empty_cache()
        print("native products kept:", {k: v for k, v in fp8_kernels.VERDICTS.items()})


if __name__ == "__main__":
    main(*sys.argv[1:])
