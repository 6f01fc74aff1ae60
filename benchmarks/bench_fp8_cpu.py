"""An FP8 target on the CPU: the SmolLM2 pair's target with every decoder-layer linear stored in FP8 (128 x 64
blocks, inputs quantized per token and group of 64 channels: FineGrainedFP8's layout), decoded target-only and with
the pair's tree, its FP8 linears dequantizing their weight every forward (``decoding.linear: plain``) or multiplying
a prepacked dequantized copy (``packed``, what ``auto`` does to weights of 2^16 elements and more), beside the float
target. All rows in this run, tokens/s and the ratio to the float target's own target-only row.

    python benchmarks/bench_fp8_cpu.py [THREADS] [NEW_TOKENS]      # defaults: 1 thread, 32 tokens

Needs the cached SmolLM2 target (``draftsmith generate`` fetches it once).
"""
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

import draftsmith
from draftsmith.hub import resolve
from draftsmith.testing.quant import quantize_folder

PROMPT = "def fibonacci(n):"
BLOCK = (128, 64)   # 64 divides every input width of SmolLM2 (576, 1536): dynamic group inputs take whole groups


def fp8_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    quantize_folder(dst, r"^model\.layers\.\d+\.", scheme="block", block=BLOCK, quantization_config=True)
    return dst


def rate(model, tree: bool, n: int) -> float:
    run = (lambda: model.generate(PROMPT, max_new_tokens=n, stop=[])) if tree else \
        (lambda: model.generate_baseline(PROMPT, max_new_tokens=n, stop=[]))
    run()   # warm-up (and, packed, nothing left to pack)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t0)
    return len(out.token_ids) / sorted(times)[1]


def main(threads: int = 1, n: int = 32) -> None:
    torch.set_num_threads(threads)
    spec = draftsmith.load_spec("smollm2")
    float_target = resolve("cache:smollm2")
    with tempfile.TemporaryDirectory() as tmp:
        fp8_target = fp8_copy(float_target, Path(tmp) / "fp8")
        rows = {}
        for label, target, linear in (("float target", float_target, "auto"),
                                      ("FP8 target, plain", fp8_target, "plain"),
                                      ("FP8 target, packed", fp8_target, "auto")):
            t0 = time.perf_counter()
            model = draftsmith.assemble(spec.with_decoding(linear=linear), target=target)
            load = time.perf_counter() - t0
            rows[label] = (load, rate(model, False, n), rate(model, True, n))
            del model
    base = rows["float target"][1]
    print(f"SmolLM2-135M target, {threads} thread(s), {n} new tokens, median of 3, tokens/s (x float target-only)")
    print(f"{'':>20} {'assemble s':>10} {'target-only':>18} {'tree':>18}")
    for label, (load, only, tree) in rows.items():
        print(f"{label:>20} {load:>10.2f} {only:>10.1f} ({only / base:4.2f}) {tree:>10.1f} ({tree / base:4.2f})")


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:3]])
