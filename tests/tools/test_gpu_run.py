"""benchmarks/gpu_run.sh's `one` stage, dry: a lent GPU machine gets one 15-minute try, so the script's shell is
checked here with nvidia-smi and python3 stood in (python3 -c runs the real one; every other python3 call is
recorded, and a bench writes a results.md where --out says): the parts run in their order under the budget, a
failing part does not stop the rest, what is measured is packed into $OUT, and parts past the budget are skipped,
said."""
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PYTHON3 = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
if [ "$1" = "-c" ]; then exec "$REAL_PYTHON" "$@"; fi
out=""; prev=""
for a in "$@"; do [ "$prev" = "--out" ] && out="$a"; prev="$a"; done
if [ -n "$out" ]; then mkdir -p "$out"; echo "| draftsmith target-only | 1.0 ms/step |" > "$out/results.md"; fi
case "$*" in *tests/gpu*) echo "1 failed, 3 passed"; exit 1;; *pytest*) echo "5 passed";; esac
echo "fake ms/step"
"""


@pytest.fixture
def dry(tmp_path):
    if shutil.which("bash") is None or shutil.which("timeout") is None:
        pytest.skip("needs bash and coreutils' timeout")
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3").write_text(PYTHON3)
    (shims / "nvidia-smi").write_text("#!/usr/bin/env bash\necho 'NVIDIA H200, 143771 MiB, 570.00'\n")
    for f in shims.iterdir():
        f.chmod(0o755)

    def run(budget: int) -> tuple[subprocess.CompletedProcess, list[str], Path]:
        env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}", "REAL_PYTHON": sys.executable,
               "CALLS": str(tmp_path / "calls.txt"), "OUT": str(tmp_path / "out"), "RES": str(tmp_path / "res"),
               "BUDGET": str(budget)}
        done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_run.sh"), "one"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        calls = (tmp_path / "calls.txt").read_text().splitlines()
        return done, [c for c in calls if not c.startswith("-c ")], tmp_path

    return run


def test_one_runs_its_parts_in_order_packs_them_and_goes_on_past_a_failure(dry):
    done, calls, tmp = dry(480)
    assert done.returncode == 0, done.stdout + done.stderr
    wanted = ["--scale 8b --out {res}/8b --batches 1", "benchmarks/profile_cuda.py 8b", "tests/gpu -m gpu -rs -x",
              "tests/components -m gpu -rs", "--scale 1b --out {res}/1b --batches 1,8 --no-hf",
              "benchmarks/bench_fp8.py 8b 1,8", "--scale 8b --out {res}/8b-batch8 --batches 8 --no-hf"]
    assert len(calls) == len(wanted), calls
    for call, want in zip(calls, wanted):
        assert want.format(res=tmp / "res") in call, (call, want)
    assert "--device cuda" in calls[0] and "--repeats 3" in calls[0]
    out = sorted(p.name for p in (tmp / "out").iterdir())
    assert out == ["1b.md", "8b-batch8.md", "8b.md", "results.tgz"], out
    with tarfile.open(tmp / "out" / "results.tgz") as t:
        names = t.getnames()
    assert "./device.txt" in names and "./gpu-tests.log" in names and "./8b/results.md" in names, names
    log = (tmp / "res" / "gpu-tests.log").read_text()
    assert "1 failed, 3 passed" in log and "5 passed" in log and "rc=1 after" in log   # the worse of the two runs
    assert "NVIDIA H200" in (tmp / "res" / "device.txt").read_text()


def test_parts_past_the_budget_are_skipped_and_said(dry):
    done, calls, tmp = dry(30)   # 30 s less 15 s to pack leaves no part its 20 s
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls == []
    skipped = (tmp / "res" / "skipped.txt").read_text().splitlines()
    assert [s.split()[1] for s in skipped] == ["bench-8b:", "profile-8b:", "gpu-tests:", "bench-1b:", "fp8:",
                                               "bench-8b-batch8:"], skipped


def test_bench_fp8_builds_and_runs_its_step_on_the_cpu(monkeypatch):
    """What of benchmarks/bench_fp8.py does not need CUDA (its imports, the stacked products of each mode, their
    weight bytes) runs here, on small widths."""
    import torch

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_fp8

    monkeypatch.setattr(bench_fp8, "DEVICE", "cpu")
    sizes = {}
    for mode, setting in bench_fp8.MODES.items():
        model = bench_fp8.layers(512, 1024, 128, 2, setting)
        xh, xi = torch.randn(3, 512).to(torch.bfloat16), torch.randn(3, 1024).to(torch.bfloat16)
        with torch.no_grad():
            outs = [lin(xi if lin.in_features == 1024 else xh) for layer in model for lin in layer]
        assert [o.shape[-1] for o in outs[:4]] == [512 + 2 * 128, 512, 2 * 1024, 512], mode
        sizes[mode] = bench_fp8.weight_bytes(model)
    assert sizes["fp8 block, native"] < 0.51 * sizes["bf16"] and sizes["fp8 block, reference"] == sizes[
        "fp8 block, native"]
