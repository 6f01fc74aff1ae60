"""An option only draftsmith checks (typer's own checks were fast already) is refused before torch is imported: a
NaN --temperature, a --max-new-tokens past the bound, an --seed past torch's range, a --dtype that is no weight dtype
(generate, bench, doctor). They waited for torch's import (~1.5 s here, the README's "~3 s" on a loaded machine).
A --device other than the cpu needs torch to be judged, and is, with the others said beside it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from test_paths_said_fast import RUN

DTYPE = ("dtype {} is not a weight dtype; use float32, bfloat16, float16 or float64 (quantized drafts are a spec's "
         "quant section)")
CASES = [
    (["generate", "--temperature", "nan"],
     "error: --temperature is nan; a finite number >= 0 is expected (0 = greedy)"),
    (["generate", "--dtype", "int8", "--max-new-tokens", "2000000", "--seed", str(2**64)],
     "error: " + DTYPE.format("'int8'") + "\n  --max-new-tokens is 2000000; an integer in 1..1048576 is expected"
     f"\n  --seed is {2**64}; None or an integer in -2**63 .. 2**64-1 is expected"
     f"\n  --seed {2**64}: greedy decoding (--temperature 0) draws nothing, so the seed would be ignored; give "
     "--temperature > 0 to sample, or leave --seed out"),
    (["bench", "--dtype", "fp4", "--graphs", "maybe"],
     "error: " + DTYPE.format("'fp4'") + "\n  --graphs: auto, on, off or compile, got 'maybe'"),
    (["bench", "--dtype", "fp4", "--graphs", "off"], "error: " + DTYPE.format("'fp4'")),
    (["doctor", "--spec", "demo", "--dtype", "torch.int8", "--max-new-tokens", "0"],
     "error: " + DTYPE.format("'torch.int8'") + "\n  --max-new-tokens is 0; an integer in 1..1048576 is expected"),
]


@pytest.mark.parametrize("args, said", CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_bad_option_is_said_before_torch_is_imported(args, said):
    res = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=120)
    assert res.stderr.strip() == said, res.stderr
    assert res.stdout.split()[-3:] == ["exit", "2", "False"], (res.stdout, res.stderr)


def test_a_device_is_judged_with_torch_and_said_with_the_others():
    res = subprocess.run([sys.executable, "-c", RUN, "generate", "--device", "mps:7", "--temperature", "-0.0",
                          "--dtype", "half8"], capture_output=True, text=True, timeout=120)
    import torch

    use = "cpu or cuda" if torch.cuda.is_available() else "cpu"   # a GPU machine offers both
    assert res.stderr.strip().splitlines() == [
        f"error: device 'mps:7' is not available here; use {use}", "  " + DTYPE.format("'half8'")], res.stderr
    assert res.stdout.split()[-3:] == ["exit", "2", "True"], (res.stdout, res.stderr)
