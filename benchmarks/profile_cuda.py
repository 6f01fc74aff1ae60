"""Where a decode step's time goes on CUDA: torch.profiler over target-only and tree decoding.

    python benchmarks/profile_cuda.py [SHAPE [OUT [CHECKPOINTS [GRAPHS]]]]    # e.g. 1b /tmp/out /tmp/ckpt compile

For the bench_scale pair of SHAPE (random weights in a Llama-3.x shape) it profiles 32 target-only tokens and 32
tokens of an 8-node tree, and writes per method: kernels launched per step, host-device synchronisations per
step (cudaStreamSynchronize / cudaDeviceSynchronize / device-to-host memcpy calls), GPU busy time against wall
time per step, and the top operators by host and by device time (``profile-<method>.txt`` under OUT).
"""
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import draftsmith
from draftsmith.bench_scale import write_pair
from draftsmith.specs.loader import load_spec

SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
# kernel families by name, first match wins: what a step's device time is made of
# (attention first: flash-attn's split-KV and cutlass-built attention kernels carry GEMM-like words too)
FAMILIES = (("attention", ("flash", "fmha", "attention", "cudnn", "sdpa")),
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


def summarise(prof, steps: int, wall: float) -> str:
    events = prof.events()
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    syncs = sum(1 for e in events if e.name in SYNCS)
    d2h = sum(1 for e in events if e.name.startswith("cudaMemcpy") and "DtoH" not in e.name)  # memcpy API calls
    graphs = sum(1 for e in events if e.name == "cudaGraphLaunch")
    busy = sum(e.device_time_total for e in kernels) / 1e3
    head = (f"steps {steps}, wall {wall * 1e3:.1f} ms ({wall * 1e3 / steps:.2f} ms/step), device busy "
            f"{busy:.1f} ms ({busy / steps:.2f} ms/step), kernels/step {len(kernels) / steps:.0f}, "
            f"graph launches/step {graphs / steps:.1f}, syncs/step {syncs / steps:.1f}, memcpy calls/step "
            f"{d2h / steps:.1f}")
    ka = prof.key_averages()
    return "\n\n".join([head, families(kernels, steps), ka.table(sort_by="cpu_time_total", row_limit=30),
                        ka.table(sort_by="cuda_time_total", row_limit=30)])


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
        run(33)  # capture graphs, warm caches
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            res = run(33)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
        steps = res.stats.target_forwards
        text = summarise(prof, steps, wall)
        (out / f"profile-{name}-{graphs}.txt").write_text(text)
        print(name, graphs, text.split("\n\n")[0], text.split("\n\n")[1], sep="\n", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
