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
case "$*" in *"${SLOW:-nothing slow}"*) sleep "${SLEEP:-6}";; esac
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

    def run(budget: int, stage: str = "one", slow: str = "nothing slow",
            sleep: int = 6, min_part: int = 20,
            need_pct: int = 0) -> tuple[subprocess.CompletedProcess, list[str], Path]:
        calls_file = tmp_path / "calls.txt"
        calls_file.unlink(missing_ok=True)
        env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}", "REAL_PYTHON": sys.executable,
               "CALLS": str(calls_file), "OUT": str(tmp_path / "out"), "RES": str(tmp_path / "res"),
               "BUDGET": str(budget), "SLOW": slow, "SLEEP": str(sleep), "MIN_PART": str(min_part),
               "NEED_PCT": str(need_pct)}
        done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_run.sh"), stage], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        calls = calls_file.read_text().splitlines() if calls_file.exists() else []
        return done, [c for c in calls if not c.startswith("-c ")], tmp_path

    return run


def test_one_runs_its_parts_in_order_packs_them_and_goes_on_past_a_failure(dry):
    done, calls, tmp = dry(480)
    assert done.returncode == 0, done.stdout + done.stderr
    wanted = ["--scale 8b --out {res}/8b --batches 1", "benchmarks/profile_cuda.py 8b", "tests/gpu -m gpu -rs -x",
              "tests/components -m gpu -rs", "--scale 1b --out {res}/1b --batches 1,8 --no-hf",
              "benchmarks/bench_select.py 1,4,8", "--scale 8b --out {res}/8b-batch8 --batches 8 --no-hf",
              "benchmarks/bench_gemv.py 8b 1,8", "benchmarks/bench_fp8.py 8b 1,8"]
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
    assert [s.split()[1] for s in skipped] == ["bench-8b:", "profile-8b:", "gpu-tests:", "bench-1b:", "select:",
                                               "bench-8b-batch8:", "gemv:", "fp8:"], skipped


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


def test_rest_runs_what_one_skipped_and_only_that(dry):
    """A slow profile leaves `one` no budget for the parts after it; `rest` (the next call, on the warm machine)
    runs exactly those, in order, and packs them with what `one` measured; a second `rest` has nothing to do."""
    # parts need 10 s; the profile starts with 25 s less the 8B bench, sleeps 16 and leaves < 10 (load-proof: a
    # bench of up to 9 s still leaves the profile time to finish)
    done, calls, tmp = dry(40, slow="profile_cuda", sleep=16, min_part=10)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(calls) == 2 and "--scale 8b --out" in calls[0] and "profile_cuda.py 8b" in calls[1], calls
    done, calls, tmp = dry(480, stage="rest")
    assert done.returncode == 0, done.stdout + done.stderr
    wanted = ["tests/gpu -m gpu -rs -x", "tests/components -m gpu -rs", "--scale 1b --out", "bench_select.py 1,4,8",
              "--scale 8b --out {res}/8b-batch8 --batches 8", "bench_gemv.py 8b 1,8", "bench_fp8.py 8b 1,8"]
    assert len(calls) == len(wanted) and all(w.format(res=tmp / "res") in c for c, w in zip(calls, wanted)), calls
    assert not (tmp / "res" / "skipped.txt").exists() and (tmp / "res" / "skipped-by-one.txt").exists()
    with tarfile.open(tmp / "out" / "results.tgz") as t:
        names = t.getnames()
    assert "./8b/results.md" in names and "./1b/results.md" in names and "./gpu-tests.log" in names, names
    done, calls, _ = dry(480, stage="rest")
    assert done.returncode == 0 and calls == [] and "nothing was skipped" in done.stdout


def test_rest_runs_a_part_again_that_ran_out_of_time(dry):
    """A part cut at its limit (timeout's 124) is listed for `rest` too: the 8B bench gets 3 s of an 18 s budget
    (parts of 2 s and more run here) and sleeps 30."""
    done, calls, tmp = dry(18, slow="--scale 8b", sleep=30, min_part=2)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (tmp / "res" / "skipped.txt").read_text().splitlines()
    assert lines[0] == "cut bench-8b: ran out of its 3s" and len(lines) == 8, lines
    done, calls, tmp = dry(480, stage="rest")
    assert len(calls) == 9 and "--scale 8b --out" in calls[0] and "--batches 1" in calls[0], calls


def test_bench_gemv_kernel_agrees_with_linear_under_the_interpreter():
    """benchmarks/bench_gemv.py's Triton GEMV, every config, odd shapes and split sums, and then the benchmark's
    whole run, on the CPU through Triton's interpreter (skipped where Triton is not installed, as in CI; its
    interpreter needs numpy < 2.3)."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gemv.py"), "--check"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "agrees with F.linear" in done.stdout, done.stdout + done.stderr
    # the whole run on tiny shapes (timings meaningless), so a GPU call does not find its bugs
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gemv.py"), "tiny", "1,3", "cpu"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.count("a step's products") == 2, done.stdout + done.stderr
    assert "WRONG" not in done.stdout and "Error" not in done.stdout, done.stdout


def test_bench_select_checks_and_times_every_selection_on_the_cpu():
    """benchmarks/bench_select.py's whole run on the CPU (eager columns): every form agrees with torch's own (no
    WRONG cell) and each shape gets its row, so a GPU call does not find its bugs."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_select.py"), "1,4", "cpu"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| argmax", "| top-"))]
    assert len(rows) == 5 and "WRONG" not in done.stdout and all(line.count("x)") == 2 for line in rows), rows


def test_a_part_starts_only_with_the_time_it_needs(dry):
    """214 s less 15 to pack leaves the 8B bench 199 s of the 200 it needs: skipped for `rest` (it would be cut and
    run again whole) while the parts after it that fit still run."""
    done, calls, tmp = dry(214, need_pct=100)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--scale 8b --out" not in calls[0] and "profile_cuda.py 8b" in calls[0], calls
    assert (tmp / "res" / "skipped.txt").read_text().splitlines()[0] == "skipped bench-8b: budget spent"


def test_the_profile_sorts_kernels_into_families_selection_first():
    """benchmarks/profile_cuda.py's families: a compiled argmax and torch.topk's radix-select kernels count as
    selection (not as compiled code or 'other'), the products, attention and fills as before; per step."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import profile_cuda

    class K:
        def __init__(self, name, us):
            self.name, self.device_time_total = name, us

    names = ["triton_red_fused_argmax_0", "void at::native::mbtopk::gatherTopK<float>",
             "void at_cuda_detail::cub::detail::scan_by_key::DeviceScanByKeyKernel",
             "void at::native::radixSortKVInPlace<-2>", "triton_poi_fused_mul_silu_0",
             "nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop",
             "Memset (Device)", "void some::other_kernel"]
    text = profile_cuda.families([K(n, 10.0) for n in names], steps=2)
    assert "selection (top-k, sort, argmax): 2.0 kernels/step, 0.020 ms/step" in text, text
    for fam in ("compiled (triton)", "matrix products", "attention", "copies and fills", "other"):
        assert f"{fam}: 0.5 kernels/step" in text, (fam, text)
