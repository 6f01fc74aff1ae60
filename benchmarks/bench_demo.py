"""Run every decoding method side by side on the demo pair and print ratios (``python benchmarks/bench_demo.py``,
same as ``draftsmith bench``). Speed is checked here, by ratios measured in one run, never by timed tests."""
import sys

from draftsmith.bench import run_bench

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    run_bench("demo", max_new_tokens=n, repeats=3)
