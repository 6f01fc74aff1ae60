"""Side-by-side benchmark: every method on the same prompt, in one process, ratios against target-only.

HF assisted generation is the chain peer: transformers' own speculative loop with a layer-skip assistant (the
target's first layers and its head), since an EAGLE draft is not a standalone causal LM."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
from rich.markup import escape

from draftsmith.threads import auto_threads
from draftsmith.threads import said as threads_said


def _turns(methods: dict, repeats: int, device: str = "cpu", warm_up: bool = True) -> dict:
    """name -> (the ``repeats`` seconds it took, one per round, the results of those rounds). Each method gets one
    untimed warm-up run first (CUDA kernels, compiled FlexAttention, first-use allocations; ``warm_up=False``: the
    caller ran them), then the methods take turns ``repeats`` times, so a machine whose speed drifts during the run (a
    shared host) slows every method alike instead of whichever ran last."""
    if warm_up:
        for fn in methods.values():
            fn()
    times, results = {name: [] for name in methods}, {name: [] for name in methods}
    for _ in range(repeats):
        for name, fn in methods.items():
            _sync(device)
            t0 = time.perf_counter()
            results[name].append(fn())
            _sync(device)
            times[name].append(time.perf_counter() - t0)
    return {name: (times[name], results[name]) for name in methods}


def _round_robin(methods: dict, repeats: int, device: str = "cpu") -> dict:
    """name -> (median seconds, the result of the median round) of :func:`_turns`: what a row's stats say (its
    forwards' time, generate's and bench's step costs) comes from the round its seconds stand for (the lower
    middle one where ``repeats`` is even and the seconds are the mean of the middle two)."""
    rows = {}
    for name, (times, results) in _turns(methods, repeats, device).items():
        middle = sorted(range(len(times)), key=times.__getitem__)[(len(times) - 1) // 2]
        rows[name] = statistics.median(times), results[middle]
    return rows


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _hf_models(target_dir: Path, keep_layers: int, device: str, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM

    from draftsmith.hub import quiet_transformers

    with quiet_transformers(bars=False):   # its loading bar would break into the bench's output
        hf = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=dtype).to(device).eval()
    cfg = {k: v for k, v in hf.config.to_dict().items() if k != "layer_types"} | {"num_hidden_layers": keep_layers}
    assistant = AutoModelForCausalLM.from_config(type(hf.config).from_dict(cfg)).to(device, dtype).eval()
    assistant.load_state_dict(hf.state_dict(), strict=False)
    return hf, assistant


def run_bench(spec="demo", *, target=None, draft=None, prompt="def fibonacci(n):", max_new_tokens=64,
              repeats=3, device="cpu", dtype="float32", console=None, graphs="auto", names=None, threads=None):
    """``names``: generate()'s arguments under the names its checks call them (the command line's options).
    ``threads``: torch's CPU threads for every method; None (as `draftsmith bench`) measures the count the tree is
    fastest with (--threads auto: draftsmith.threads) before any method is timed, and leaves it set."""
    from rich.console import Console
    from rich.table import Table

    import draftsmith
    from draftsmith.assembler.assemble import parse_dtype
    from draftsmith.assembler.folders import checkpoint_dir
    from draftsmith.components import packed
    from draftsmith.decoding.arguments import check_call
    from draftsmith.decoding.graphs import graphs_enabled
    from draftsmith.hub import quiet_transformers
    from draftsmith.specs.loader import load_spec

    console = console or Console()
    spec_obj = load_spec(spec).with_decoding(graphs=graphs)
    model = draftsmith.assemble(spec_obj, target=target, draft=draft, device=device, dtype=dtype)
    target_dir = checkpoint_dir(spec_obj, target, "target")
    n = max_new_tokens
    # generate()'s checks
    ids = check_call(model, prompt, max_new_tokens=n, what="draftsmith bench", names=names)[0][0]
    kw = dict(max_new_tokens=n, stop=[])   # every method makes exactly n tokens (transformers: min_new_tokens)
    if threads is None:
        choice = auto_threads(lambda: model.generate(ids, max_new_tokens=min(8, n), stop=[]), device)
        console.print(f"threads {choice.said('the tree')}")
    else:
        torch.set_num_threads(threads)
    methods = {
        "draftsmith target-only": lambda: model.generate_baseline(ids, **kw),
        "draftsmith chain (topk=1)": lambda: model.generate(ids, topk=1, **kw),
        "draftsmith tree": lambda: model.generate(ids, **kw),
    }
    if torch.device(device).type == "cuda":  # on CPU FlexAttention is torch's unfused reference: not a contender
        flex = draftsmith.assemble(spec_obj.with_decoding(attention="flex"), target=target, draft=draft, device=device,
                                   dtype=dtype)
        methods["draftsmith tree, attention: flex"] = lambda: flex.generate(ids, **kw)
    if any(packed.is_packed(m) for m in model.target.modules()):  # what decoding.linear buys
        plain = draftsmith.assemble(spec_obj.with_decoding(linear="plain"), target=target, draft=draft, device=device,
                                    dtype=dtype)
        methods["draftsmith target-only, plain matmuls"] = lambda: plain.generate_baseline(ids, **kw)
        methods["draftsmith tree, plain matmuls"] = lambda: plain.generate(ids, **kw)
    hf, assistant = _hf_models(target_dir, 2, device, parse_dtype(dtype))
    x = torch.tensor([ids], device=device)
    gen = {"max_new_tokens": n, "min_new_tokens": n, "do_sample": False, "pad_token_id": 0}
    methods["HF generate (target only)"] = torch.inference_mode()(lambda: hf.generate(x, **gen))
    methods["HF assisted (2-layer skip)"] = torch.inference_mode()(lambda: hf.generate(x, assistant_model=assistant,
                                                                                       **gen))
    # the peer that needs no draft: n-gram lookup in the prompt (transformers' prompt-lookup decoding)
    methods["HF prompt lookup (10 tokens)"] = torch.inference_mode()(lambda: hf.generate(x, prompt_lookup_num_tokens=10,
                                                                                         **gen))
    with quiet_transformers():   # its assisted / prompt-lookup paths warn about what they build themselves
        rows = _round_robin(methods, repeats, device)
    made = {name: len(res.token_ids) if hasattr(res, "token_ids") else res.shape[1] - x.shape[1]
            for name, (_, res) in rows.items()}   # tokens each run produced (n, unless a method stopped early)
    base = made["draftsmith target-only"] / rows["draftsmith target-only"][0]
    table = Table(title=f"bench: {n} new tokens, median of {repeats} round{'s' * (repeats != 1)} after a warm-up, "
                        f"{device} {dtype}, {threads_said(torch.get_num_threads())}, prompt {escape(repr(prompt))}")
    # (the prompt: user text, never read as rich markup)
    for col in ("method", "seconds", "tokens/s", "speed vs draftsmith target-only", "tau",
                "decode time outside forwards"):
        table.add_column(col)
    # with whole-step CUDA graphs the runners' timers run only in the prefill and while a step is captured: no share
    timed = not graphs_enabled(graphs, device)
    for name, (sec, res) in rows.items():
        stats = getattr(res, "stats", None)
        tau = f"{stats.acceptance_length:.2f}" if stats else "-"
        # share of the decoding's wall time (the prefill left out) outside model forwards (tree building,
        # verification, compaction, the loop); beside it the KV pool's addressing and masks, timed inside the
        # forwards. Host time: on CUDA without graphs it is launch time, not GPU time
        share = (f"{100 * stats.decode_bookkeeping_share:.1f}% (+{100 * stats.decode_addressing_share:.1f}% KV "
                 "addressing, inside forwards)" if stats and timed and stats.steps else "-")
        table.add_row(name, f"{sec:.3f}", f"{made[name] / sec:.1f}", f"{made[name] / sec / base:.2f}x", tau, share)
    console.print(table)
    _step_costs(rows, timed and torch.device(device).type == "cpu", console)   # CUDA's timers see launches
    return rows


def _step_costs(rows: dict, timed: bool, console) -> None:
    """Under the table: each speculative draftsmith row's step in steps of the target-only row of its own
    assembly (", plain matmuls" against the plain target-only), as generate prints it (stats.step_cost)."""
    from draftsmith.decoding.stats import step_cost

    for name, (_, res) in rows.items():
        stats = getattr(res, "stats", None)
        if stats is None or stats.mode == "baseline":   # transformers' rows have no stats
            continue
        base = rows.get(f"draftsmith target-only,{name.partition(',')[2]}", rows["draftsmith target-only"])[1]
        if (cost := step_cost(stats, base.stats, timed)) is not None:
            console.print(f"{escape(name)}: {cost.said(stats.acceptance_length)}")
