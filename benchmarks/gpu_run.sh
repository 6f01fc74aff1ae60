#!/usr/bin/env bash
# The CUDA measurements of issue 10, for a session that has the device tool (an H100 or H200 machine).
#
# That machine's image (KINDS.md, 2026-11) has Python 3.12, torch 2.11, transformers 5.x, triton, typer, rich,
# pluggy, pyyaml, safetensors, regex, scipy, hypothesis, pytest and matplotlib, but NOT pydantic, and it cannot
# reach a package index. So, once, HERE (this checkout, with PyPI), fetch the missing wheels into wheels/
# (gitignored):
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d wheels pydantic==2.13.4 pydantic-core==2.46.4 annotated-types typing-inspection
#   # (add matplotlib and its needs only if `python3 -c "import matplotlib"` fails there)
#
# then call the device tool's `run` with carry=["wheels"], one stage per call (each well inside 10 minutes):
#
#   run(command="bash benchmarks/gpu_run.sh tests", carry=["wheels"], timeout_s=600)
#   run(command="bash benchmarks/gpu_run.sh 1b",    carry=["wheels"], timeout_s=600)
#   run(command="bash benchmarks/gpu_run.sh 8b",    carry=["wheels"], timeout_s=600)
#
# Everything comes back under $OUT (logs, results.md / results.json, one PNG per shape); the random checkpoints
# stay in /tmp/ckpt on the machine (16 GB for 8B), so keep the stages of one shape on one warm machine.
set -uo pipefail
stage=${1:-all}
BATCHES=${BATCHES:-1,8}   # e.g. BATCHES=1 bash benchmarks/gpu_run.sh 8b, if a stage nears the 10-minute limit
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
if ! python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    wheels/*.whl || { echo "carry wheels/ (see the top of this file)"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__)" \
  | tee -a "$OUT/device.txt"

case "$stage" in
  tests|all)
    python3 -m pytest -q -p no:cacheprovider tests/gpu -rs 2>&1 | tee "$OUT/gpu-tests.log" ;;&
  1b|all)
    python3 -m draftsmith bench --scale 1b --device cuda --out "$OUT" --checkpoints /tmp/ckpt --batches "$BATCHES" 2>&1 \
      | tee "$OUT/bench-1b.log" ;;&
  8b|all)
    # batch 1 with transformers' rows, batch 8 without (its static-cache compile would not fit the 10 minutes);
    # measured 2026-11-24 in ~6 minutes on an H100, checkpoints written included
    python3 -m draftsmith bench --scale 8b --device cuda --out "$OUT/8b" --checkpoints /tmp/ckpt --batches 1 \
      --repeats 2 2>&1 | tee "$OUT/bench-8b.log"
    python3 -m draftsmith bench --scale 8b --device cuda --out "$OUT/8b-batch8" --checkpoints /tmp/ckpt \
      --batches 8 --repeats 2 --no-hf 2>&1 | tee "$OUT/bench-8b-batch8.log" ;;&
  tests|1b|8b|all) ;;
  *) echo "usage: $0 tests|1b|8b|all"; exit 2 ;;
esac
