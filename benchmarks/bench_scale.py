"""Random weights in Llama-3.x shapes against the bandwidth limit and transformers (see draftsmith/scale/).

    python benchmarks/bench_scale.py [SHAPES [DEVICE [OUT]]]     # e.g. tiny cpu, or 1b,8b cuda /tmp/out
Same as ``draftsmith bench --scale SHAPES --device DEVICE --out OUT``."""
import sys

import torch

from draftsmith.scale.report import markdown
from draftsmith.scale.run import run_scale

if __name__ == "__main__":
    shapes = (sys.argv[1] if len(sys.argv) > 1 else "tiny").split(",")
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    out = sys.argv[3] if len(sys.argv) > 3 else "bench-scale"
    torch.set_num_threads(1 if device == "cpu" else torch.get_num_threads())
    print(markdown(run_scale(shapes, out, device=device)))
