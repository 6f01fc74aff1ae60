"""Side-by-side benchmark: every method on the same prompt, in one process, ratios against target-only.

HF assisted generation is the chain peer: transformers' own speculative loop with a layer-skip assistant (the
target's first layers and its head), since an EAGLE draft is not a standalone causal LM."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch


def _median_time(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def _hf_models(target_dir: Path, keep_layers: int):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32).eval()
    cfg = {k: v for k, v in hf.config.to_dict().items() if k != "layer_types"} | {"num_hidden_layers": keep_layers}
    assistant = AutoModelForCausalLM.from_config(type(hf.config).from_dict(cfg)).eval()
    assistant.load_state_dict(hf.state_dict(), strict=False)
    return hf, assistant


def run_bench(spec="demo", *, target=None, draft=None, prompt="def fibonacci(n):", max_new_tokens=64,
              repeats=3, console=None):
    import draftsmith
    from draftsmith.assembler.assemble import checkpoint_dir
    from draftsmith.specs.loader import load_spec

    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    spec_obj = load_spec(spec)
    model = draftsmith.assemble(spec_obj, target=target, draft=draft)
    target_dir = checkpoint_dir(spec_obj, target, "target")
    ids = model._encode(prompt)[0][0]
    n = max_new_tokens
    rows = {}
    rows["draftsmith target-only"] = _median_time(lambda: model.generate_baseline(ids, max_new_tokens=n), repeats)
    rows["draftsmith chain (topk=1)"] = _median_time(lambda: model.generate(ids, max_new_tokens=n, topk=1), repeats)
    rows["draftsmith tree"] = _median_time(lambda: model.generate(ids, max_new_tokens=n), repeats)
    hf, assistant = _hf_models(target_dir, keep_layers=2)
    x = torch.tensor([ids])
    gen = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    with torch.inference_mode():
        rows["HF generate (target only)"] = _median_time(lambda: hf.generate(x, **gen), repeats)
        rows["HF assisted (2-layer skip)"] = _median_time(
            lambda: hf.generate(x, assistant_model=assistant, **gen), repeats)
    base = rows["draftsmith target-only"][0]
    table = Table(title=f"bench: {n} new tokens, median of {repeats}, prompt {prompt!r}")
    for col in ("method", "seconds", "tokens/s", "speed vs draftsmith target-only", "tau"):
        table.add_column(col)
    for name, (sec, res) in rows.items():
        tau = f"{res.stats.acceptance_length:.2f}" if hasattr(res, "stats") else "-"
        table.add_row(name, f"{sec:.3f}", f"{n / sec:.1f}", f"{base / sec:.2f}x", tau)
    console.print(table)
    return rows
