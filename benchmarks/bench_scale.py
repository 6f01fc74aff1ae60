"""Random weights in Llama-3.x shapes against the bandwidth limit and transformers (see draftsmith/scale/).

    python benchmarks/bench_scale.py [SHAPES [DEVICE [OUT]]]     # e.g. tiny cpu, or 1b,8b cuda /tmp/out
Runs ``draftsmith bench --scale SHAPES --device DEVICE --out OUT`` (its checks, messages and exit codes)."""
import sys

from draftsmith.cli import app

if __name__ == "__main__":
    args = sys.argv[1:]
    shapes, device, out = [*args, *["tiny", "cpu", "bench-scale"][len(args):]][:3]   # the defaults past those given
    app(["bench", "--scale", shapes, "--device", device, "--out", out, *args[3:]], prog_name="bench_scale.py")
