"""The scale benchmark's timing: functions timed back to back and taking turns (by CUDA events on a GPU), single
forwards as CUDA graph replays, the device's copy bandwidth and the bytes a decode step reads, the device's name and
what torch.compile did."""
from __future__ import annotations

import torch


def _block_ms(fn, device: str, reps: int) -> float:
    """ms per call of ``fn`` run ``reps`` times back to back. On CUDA timed by events on the stream, so the host's
    launch and clock round trips overlap the device work as in a real decode loop instead of adding ~20-40 us to
    each short call (a draft forward is ~0.5 ms at 8B)."""
    import time

    if torch.device(device).type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) * 1e3 / reps


def turns_ms(fns: dict, device: str, rounds: int, reps: int = 20) -> dict[str, list[float]]:
    """name -> ms per call, one sample per round: after one untimed call of each, the functions take turns
    ``rounds`` times, each run ``reps`` times back to back per turn, so a drifting device (clocks, a shared host)
    slows them alike and a ratio of two of them is read on the same rounds."""
    for fn in fns.values():
        fn()
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(_block_ms(fn, device, reps))
    return samples


def captured(fn, device: str):
    """``fn`` as the replay of one CUDA graph that captured it (after a warm-up call), so that timing it times the
    device work it launches, not the launches; ``fn`` itself off CUDA. The replay keeps the graph and its memory
    alive, not the tensors ``fn`` reads from outside: the caller keeps those."""
    if torch.device(device).type != "cuda":
        return fn
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay   # the bound method keeps the graph (and the memory it reads) alive


def back_to_back_ms(fn, device: str, rounds: int, reps: int = 20) -> float:
    """ms per call of ``fn`` run ``reps`` times back to back (median over ``rounds``), after one untimed call."""
    import statistics

    return statistics.median(turns_ms({"": fn}, device, rounds, reps)[""])


def copy_bandwidth(device: str) -> float:
    """Bytes per second of a large device-to-device copy, counting bytes read and written."""
    n = (1 << 30) if torch.device(device).type == "cuda" else (1 << 26)
    src, dst = torch.empty(n, dtype=torch.uint8, device=device), torch.empty(n, dtype=torch.uint8, device=device)
    return 2 * n / (back_to_back_ms(lambda: dst.copy_(src), device, rounds=5, reps=5) / 1e3)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes a decode step reads: every weight once, but not an input embedding of its own (a step reads one row
    of it per token; a tied one is the head, read whole)."""
    embed = model.get_submodule("model.embed_tokens").weight if hasattr(model, "model") else None
    head = getattr(getattr(model, "lm_head", None), "weight", None)
    skip = {embed.data_ptr()} if embed is not None and (head is None or head.data_ptr() != embed.data_ptr()) else set()
    seen, total = set(skip), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel() * p.element_size()
    return total


def forward_call(runner, T: int, B: int, prefix: int, device: str, hidden: torch.Tensor | None = None,
                 hand_over: bool = True):
    """(fn, how): ``fn()`` runs one runner forward over T new tokens per row after ``prefix`` committed ones, its
    arguments built once here. A target runner with ``hidden`` None (``hand_over``: gather the draft's taps, as a
    verification does; False, as target-only decoding does), a draft runner over its own ``hidden`` [B, 1, H].
    On CUDA the forward is captured as a CUDA graph (its warm-up runs and capture happen here) and ``fn`` is
    that graph's replay on its already filled input buffers, so what is timed is the device work alone; where
    capture fails, and on the CPU, ``fn`` is the runner's call (its timers and the KV addressing included, as a
    decode step runs it). ``how``: "graph replay" or "eager"."""
    from draftsmith.decoding.graphs import Replay
    from draftsmith.decoding.stats import Stats

    cuda = torch.device(device).type == "cuda"
    runner.stats = Stats()  # time into a scratch record, not into the statistics of the last generate call
    ar = torch.arange(T, device=device)
    args = [torch.zeros(B, T, dtype=torch.long, device=device)]
    if hidden is None:
        call = lambda *a: runner(*a, hand_over=hand_over)
    else:
        call = lambda *a: runner(*a, from_target=False)
        args.append(hidden[:, :1].expand(B, T, -1).contiguous())   # once, not in every timed call
    args += [ar.expand(B, T), ar.expand(B, T), (ar[:, None] >= ar[None, :]).expand(B, T, T)]
    runner.pool.lens.fill_(prefix)
    span = runner.pool.bucket(prefix + T + 1)   # the keys a step at this length attends (runners.KeySpans)

    def spanned(*a):
        runner.pool.span = span
        try:
            return call(*a)
        finally:
            runner.pool.span = None   # a graph keeps the span it was captured at; the pool goes back to whole

    fwd = Replay(spanned, cuda)
    fwd(*args)   # on CUDA: warm-up runs and the capture
    graph = next(iter(fwd.graphs.values()), None)   # (not ``captured``: the function above)
    if graph is not None:
        def replay(g=graph):   # g holds the static input buffers the graph reads: were they freed with fwd,
            g.graph.replay()      # their memory would be reused under the graph (out-of-bounds indices on an H200)
        return replay, "graph replay"
    return (lambda: spanned(*args)), "eager"


def _median(xs):
    import statistics

    return statistics.median(xs)


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's model name (Linux), else its architecture."""
    import platform

    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(torch.device(device))
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def compile_summary() -> dict:
    """What torch.compile did in this process so far: graphs compiled (every variant of every fused function)
    and the seconds spent compiling them (dynamo and its backend), the first thing to read when a stage is slow."""
    from torch._dynamo.utils import compile_times, counters

    names, seconds = compile_times(repr="csv", aggregate=True)
    spent = float(dict(zip(names, seconds)).get("_compile.compile_inner", 0.0))
    return {"graphs": int(counters["stats"]["unique_graphs"]), "seconds": round(spent, 1)}
