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
#
# then call the device tool's `run` with carry=["wheels"], one stage per call. A machine goes back 30 s after a
# call, so every call starts bare (minutes of device time): each stage writes its own checkpoints and fits one
# 10-minute call (times measured on an H100 on 2026-11-24, before the step's arithmetic was compiled too: the
# first call of each compiled function now compiles it, so the GPU tests got more room):
#
# Since 2026-11 a task that draws a machine has 15 minutes of device time in all (start, idle and give-back
# included), so the stage to run is `one`: every measurement issue 10 names, in its order of importance, in ONE
# call that ends by $BUDGET seconds (default 480) whatever happens, each part cut to what is left and packed
# into $OUT as soon as it ends; then give_back at once:
#
#   run(command="BUDGET=540 bash benchmarks/gpu_run.sh one", carry=["wheels"], timeout_s=575)
#
# then AT ONCE (a machine goes back 30 s after a call; warm, it keeps /tmp/ckpt and the compiled kernels) the
# parts `one` skipped for lack of budget or cut at their limit, with what the lease's budget_left_s leaves
# (B = budget_left_s - 45):
#
#   run(command="BUDGET=B bash benchmarks/gpu_run.sh rest", carry=["wheels"], timeout_s=B + 25)
#
# (2026-11-28 on an H200: the start and transfers took ~36 s, `one` 575 s, leaving 325 s; 2026-11-29: `one` ran
# 529 s and left 339 s, `rest` with BUDGET=290 ran 223 s.)
# Its order: the 8B bench at batch 1 with transformers' rows (the issue's "done when"), a profile of 8B steps,
# the float32 equality and sampling GPU tests (FP8 native products against the reference path among them), the
# 1B bench at batch 1 and 8, the products one at a time against a Triton GEMV (bench_gemv.py), the FP8 linears of
# an 8B step (bench_fp8.py, <= 45 s: block and channel native products vs bf16 and the dequantizing reference
# path; measured on an H200 on 2026-11-28, benchmarks/results/h200.md), the 8B bench at batch 8. A part starts only
# when the time it needs is left (else `rest` runs it). The stages
# below are the older split, for a session that has more time:
#
#   run(command="bash benchmarks/gpu_run.sh tests", carry=["wheels"], timeout_s=600)   # GPU tests + 1B, ~4-6 min
#   run(command="bash benchmarks/gpu_run.sh 8b",    carry=["wheels"], timeout_s=600)   # 8B bench + profile, ~7 min
#   run(command="bash benchmarks/gpu_run.sh profile-1b", carry=["wheels"], timeout_s=300)   # only if time remains
#
# `tests`: the GPU tests and bench_scale at 1B (batch 1 and 8, no transformers rows); `profile-1b` (a third call
# when minutes remain): a profile of 1B steps. Every call compiles its fused kernels from scratch (a bare machine),
# which the limits below allow for; results.json records what compiling cost after every row.
# `8b`: bench_scale at 8B (batch 1 with transformers' rows, batch 8 without), a profile of 8B steps and
# bench_gemm. The device tool returns at most 8 files, so everything is packed into $OUT/results.tgz, with the
# tables also as $OUT/*.md for a quick look.
set -uo pipefail
stage=${1:-tests}
OUT=${OUT:-/tmp/out}
RES=${RES:-/tmp/gpu-results}   # overridable for the dry run in tests/tools/test_gpu_run.py
mkdir -p "$OUT" "$RES"
source "$(dirname "$0")/gpu_env.sh" pydantic
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$RES/device.txt"
python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__)" \
  | tee -a "$RES/device.txt"
# median of 3 rounds (after a warm-up run each): at 8B batch 1 a round of whole runs is ~5.5 s of draftsmith's
# (1 and 128 tokens of 4 methods, 2026-11-24's step costs) and ~4.5 s of transformers' rows, so the third round
# adds ~10 s to the bench-8b part (300 s; its batch-1 and batch-8 runs took ~6 min together on 2026-11-24,
# checkpoints written included); the one-token forward, now timed once per batch instead of once per method,
# gives ~1 s back. Each phase of a batch (whole runs, single forwards, transformers' rows) is saved as it ends, so
# a part cut at its limit keeps what it measured.
bench="python3 -m draftsmith bench --device cuda --checkpoints /tmp/ckpt --repeats 3"
pack() {   # what is measured so far, into $OUT after every command: a call cut off at its limit still returns it
  for f in "$RES"/*/results.md; do [ -f "$f" ] && cp "$f" "$OUT/$(basename "$(dirname "$f")").md"; done
  tar czf "$OUT/results.tgz" -C "$RES" .
}

START=$SECONDS
BUDGET=${BUDGET:-480}
left() {   # seconds left for a part capped at $1 that needs $2 to be worth starting: what the budget leaves,
  # minus 15 s to pack; 0 = skip it for `rest` (under MIN_PART s, 20, or under its need: NEED_PCT percent of $2,
  # 100; the dry run sets both lower)
  local l=$((BUDGET - (SECONDS - START) - 15)); [ "$l" -gt "$1" ] && l=$1
  local need=$(($2 * ${NEED_PCT:-100} / 100)); [ "$need" -lt "${MIN_PART:-20}" ] && need=${MIN_PART:-20}
  [ "$l" -ge "$need" ] && echo "$l" || echo 0
}
part() {   # part CAP NEED NAME COMMAND...: run it under what is left of the budget (at most CAP s; skipped for
  # `rest` when less than NEED s is left: a part cut at its limit is run again whole), log it, pack
  local t; t=$(left "$1" "$2"); local name=$3; shift 3
  if [ -n "${ONLY:-}" ] && [[ "$ONLY" != *" $name "* ]]; then return; fi   # `rest`: only what `one` skipped
  if [ "$t" = 0 ]; then echo "skipped $name: budget spent" | tee -a "$RES/skipped.txt"; return; fi
  echo "== $name (up to ${t}s, $((SECONDS - START))s in)"
  timeout "$t" "$@" > "$RES/$name.log" 2>&1; local rc=$?
  echo "rc=$rc after $((SECONDS - START))s" >> "$RES/$name.log"
  # a part its time ran out on is `rest`'s to run again, whole (what it saved stays packed until then)
  [ "$rc" = 124 ] && echo "cut $name: ran out of its ${t}s" >> "$RES/skipped.txt"
  grep -E "WRONG|^\| (argmax|top-)|ms/step|decode forward| \| [18] \| |kept:|passed|skipped|failed|FAILED|ERROR|kernels/step|device time|rc=" "$RES/$name.log" | grep -v DEBUG | tail -25
  pack
}

case "$stage" in
  rest)   # the parts a previous `one` on this (warm) machine skipped, in its order; their results join its own
    [ -f "$RES/skipped.txt" ] || { echo "nothing was skipped"; exit 0; }
    ONLY=" $(awk '{sub(":", "", $2); printf "%s ", $2}' "$RES/skipped.txt")"
    mv "$RES/skipped.txt" "$RES/skipped-by-one.txt"
    stage=one ;;
esac
case "$stage" in
  one)
    # caps and needs: what each part took or may take on a bare H200 (2026-11-29: bench-8b 167 s, profile-8b
    # 54 s, bench-1b 120 s); `one` (BUDGET 540) fits the first three, `rest` (~290 s) the 1B bench and 8B at
    # batch 8 (skipped on 2026-11-28 and 11-29), then gemv and fp8 as time allows; `select` fits in what `one` has
    # left after its first three
    part 270 200 bench-8b $bench --scale 8b --out "$RES/8b" --batches 1
    # the profile second: whether the device still waits for the host between steps (wall vs busy ms per step;
    # 0.43 of 5.11 ms on an H200 before the run-ahead loop, 2026-11-28)
    part 60 40 profile-8b python3 benchmarks/profile_cuda.py 8b "$RES/profile-8b" /tmp/ckpt
    # tests/gpu stops at its first failure (what fails there fails everything after); the components' GPU tests
    # (FP8 kernels against the reference path) each report, so one kernel's verdict hides no other. --durations:
    # on an H200 on 2026-11-29, 180 s ran 30 tests on a bare machine; on the warm one tests/gpu took 118 s (32
    # passed) and the components' 43 s (13 passed), and 180 s ended just after both had reported: so 260
    part 260 200 gpu-tests bash -c "python3 -m pytest -q -p no:cacheprovider tests/gpu -m gpu -rs -x --durations=12; r=\$?; \
      python3 -m pytest -q -p no:cacheprovider tests/components -m gpu -rs || r=1; exit \$r"
    part 150 120 bench-1b $bench --scale 1b --out "$RES/1b" --batches 1,8 --no-hf
    # the vocabulary argmax and the draft's top-k, torch's against the two-stage forms the step now runs (eager
    # and compiled, 50 calls a CUDA graph): 10 compiles, ~40 s; `one` reaches it when bench-1b is left for `rest`
    part 60 40 select python3 benchmarks/bench_select.py 1,4,8
    part 90 80 bench-8b-batch8 $bench --scale 8b --out "$RES/8b-batch8" --batches 8 --no-hf
    # whether a GEMV kernel closes the products' shortfall (0.87 of the copy bandwidth at 8B): cuBLAS vs a Triton
    # GEMV vs inductor's reduction per product, rows 1 and 8 (~20 Triton and 5 inductor compiles; 23 s on
    # 2026-11-29, fp8 14 s: both measured twice, the same both times, so they come last)
    part 110 80 gemv python3 benchmarks/bench_gemv.py 8b 1,8
    part 45 40 fp8 python3 benchmarks/bench_fp8.py 8b 1,8 ;;
  tests)
    timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu tests/components -m gpu -rs 2>&1 \
      | grep -v DEBUG \
      | tee "$RES/gpu-tests.log" | grep -E "^(FAILED|ERROR)|passed|failed"; pack
    timeout 220 $bench --scale 1b --out "$RES/1b" --batches 1,8 --no-hf 2>&1 | tee "$RES/bench-1b.log" \
      | grep "ms/step" ;;
  profile-1b)   # a third call, if the session has the minutes: where a 1B step's device time goes
    timeout 200 python3 benchmarks/profile_cuda.py 1b "$RES/profile-1b" /tmp/ckpt 2>&1 | grep -E "steps|kernels/step|device time" ;;
  8b)
    timeout 290 $bench --scale 8b --out "$RES/8b" --batches 1 2>&1 | tee "$RES/bench-8b.log" | grep "ms/step"; pack
    timeout 100 $bench --scale 8b --out "$RES/8b-batch8" --batches 8 --no-hf 2>&1 | tee "$RES/bench-8b-batch8.log" \
      | grep "ms/step"; pack
    timeout 90 python3 benchmarks/profile_cuda.py 8b "$RES/profile-8b" /tmp/ckpt 2>&1 | grep -E "steps|kernels/step|device time"; pack
    timeout 60 python3 benchmarks/bench_gemm.py 1b,8b 2>&1 | tee "$RES/gemm.log" ;;
  *) echo "usage: $0 one|rest|tests|8b|profile-1b"; exit 2 ;;
esac
pack
ls "$OUT"
