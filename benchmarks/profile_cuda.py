"""Where a decode step's time goes on CUDA: torch.profiler over target-only and tree decoding.

    python benchmarks/profile_cuda.py [SHAPE [OUT [CHECKPOINTS [GRAPHS]]]]    # e.g. 1b /tmp/out /tmp/ckpt compile

For the scale benchmark's pair of SHAPE (random weights in a Llama-3.x shape) it profiles 33 and 1 new tokens of
target-only decoding, an 8-node tree and a chain of 6, and writes per method, from the difference of the two runs
(so the prefill drops out): kernels launched per step, host-device synchronisations per step (stream / device /
event synchronize calls) and device-to-host copies, GPU busy time per step, and the top operators by host and by
device time (``profile-<method>.txt`` under OUT).
"""
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import draftsmith
from draftsmith.scale.checkpoints import write_pair
from draftsmith.specs.loader import load_spec

SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
# kernel families by name, first match wins: what a step's device time is made of
# (attention first: flash-attn's split-KV and cutlass-built attention kernels carry GEMM-like words too; selection
# before triton: a compiled argmax is a triton kernel; torch.topk's radix select runs cub scans and fills too, which
# count under their own names: scans here, fills under copies)
FAMILIES = (("attention", ("flash", "fmha", "attention", "cudnn", "sdpa")),
            ("selection (top-k, sort, argmax)", ("topk", "sort", "scan_by_key", "argmax")),
            ("compiled (triton)", ("triton",)),
            ("matrix products", ("gemm", "gemv", "cutlass", "xmma", "nvjet", "cublas", "splitk")),
            ("copies and fills", ("copy", "fill", "index", "scatter", "gather", "memcpy", "memset")))


def families(kernels, steps: int) -> str:
    """Device time per step by kernel family: 'family: N kernels, T ms (mean us each)' lines."""
    acc: dict[str, list[float]] = {}
    for e in kernels:
        name = e.name.lower()
        fam = next((f for f, keys in FAMILIES if any(k in name for k in keys)), "other")
        acc.setdefault(fam, []).append(e.device_time_total)
    lines = []
    for fam, times in sorted(acc.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"  {fam}: {len(times) / steps:.1f} kernels/step, {sum(times) / 1e3 / steps:.3f} ms/step "
                     f"({sum(times) / len(times):.1f} us each)")
    return "\n".join(["device time by kernel family:", *lines])


def counts(prof) -> dict[str, float]:
    """Kernels, host-device synchronisations, device-to-host copies, graph launches and device-busy ms of a
    profiled run."""
    events = prof.events()
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    return {"kernels": len(kernels), "syncs": sum(1 for e in events if e.name in SYNCS),
            "DtoH copies": sum(1 for e in kernels if e.name.startswith("Memcpy DtoH")),
            "graph launches": sum(1 for e in events if e.name == "cudaGraphLaunch"),
            "busy ms": sum(e.device_time_total for e in kernels) / 1e3}


def summarise(long, short, steps: int, wall: float) -> str:
    """Per step = (the long run - the short run) / their difference in steps: the prefill, which both runs make,
    drops out (it is ~1300 kernels at 1B, which over 32 steps read as ~40 more per step)."""
    a, b = counts(long), counts(short)
    per = {k: (a[k] - b[k]) / steps for k in a}
    head = (f"steps {steps}, wall {wall * 1e3:.1f} ms ({wall * 1e3 / steps:.2f} ms/step, prefill included), device "
            f"busy {per['busy ms']:.2f} ms/step, kernels/step {per['kernels']:.0f}, graph launches/step "
            f"{per['graph launches']:.1f}, syncs/step {per['syncs']:.1f}, DtoH copies/step {per['DtoH copies']:.1f}")
    kernels = [e for e in long.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    ka = long.key_averages()
    return "\n\n".join([head, families(kernels, steps) + "\n  (the long run's kernels, prefill included)",
                         ka.table(sort_by="cpu_time_total", row_limit=30),
                         ka.table(sort_by="cuda_time_total", row_limit=30)])


def profiled(run, n: int):
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        res = run(n)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    return prof, res, wall


def main(shape="1b", out="/tmp/out", ckpt="/tmp/ckpt", graphs="auto"):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    target, draft = write_pair(Path(ckpt), shape, "cuda")
    model = draftsmith.assemble(load_spec("eagle3-llama").with_decoding(graphs=graphs), target=target, draft=draft,
                                device="cuda", dtype="bfloat16")
    prompt = list(range(2, 130))
    runs = {"target-only": lambda n: model.generate_baseline(prompt, max_new_tokens=n, stop=[]),
            "tree8": lambda n: model.generate(prompt, max_new_tokens=n, topk=4, steps=5, draft_tokens=8, stop=[]),
            "chain6": lambda n: model.generate(prompt, max_new_tokens=n, topk=1, steps=5, stop=[])}
    for name, run in runs.items():
        run(33), run(1)  # capture graphs, warm caches
        (long, res, wall), (short, one, _) = profiled(run, 33), profiled(run, 1)
        steps = res.stats.target_forwards - one.stats.target_forwards
        text = summarise(long, short, steps, wall)
        (out / f"profile-{name}-{graphs}.txt").write_text(text)
        print(name, graphs, text.split("\n\n")[0], text.split("\n\n")[1], sep="\n", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
