"""Run every decoding method side by side on the demo pair and print ratios (``python benchmarks/bench_demo.py
[N_TOKENS [DEVICE [DTYPE]]]``, same as ``draftsmith bench``). Speed is checked here, by ratios measured in one run,
never by timed tests."""
import sys

import torch

from draftsmith.bench import run_bench

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    dtype = sys.argv[3] if len(sys.argv) > 3 else "float32"
    torch.set_num_threads(1)
    run_bench("demo", max_new_tokens=n, repeats=3, device=device, dtype=dtype)
