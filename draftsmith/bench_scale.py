"""bench_scale: draftsmith against the memory-bandwidth limit and transformers, on random weights in real Llama-3.x
shapes (``draftsmith bench --scale 1b,8b``, ``python benchmarks/bench_scale.py``).

For each shape it writes (once, under ``--out``) a random Llama target in the Hugging Face layout and an EAGLE-3
draft in the ``midlayer.*`` layout with a reduced vocabulary, assembles them through ``assemble("eagle3-llama")``
and measures, side by side in one process, at batch 1 and 8:

* the bandwidth limit: the bytes a decode step reads (every target weight once; an untied input embedding not at
  all, since a step reads one row of it) over the measured device copy bandwidth (read + write);
* draftsmith target-only, a chain of 6 nodes, trees of 8 and 32 nodes: ms per step (decode or verification, the
  draft forwards included), the step as a multiple of a target-only step, ms per draft forward (one expansion)
  and per verification forward (the target over the tree), the latter also as a multiple of the same target's
  one-token forward (the issue's "tree of 8 nodes <= 1.15x" reads on that column; the whole step adds the draft
  forwards). Single forwards are timed back to back with CUDA events (20 per round), not one at a time by the
  host clock, whose round trip is 5-10% of an 8B draft forward;
* transformers ``generate`` with its dynamic cache (eager) and its static cache (compiled by transformers on
  CUDA);
* tokens/s projected at tau = 3, 4, 6 from the measured step costs (B * tau / step); past a method's deepest
  acceptance (steps + 1) nothing is projected, and at exactly that the figure is marked (max): a ceiling.

A step's cost is measured as (time of N new tokens - time of 1 new token) / steps, so prefill drops out. Random
drafts accept ~nothing, which is why speculative speed is projected from step costs rather than measured.
Writes results.json, results.md (after every row, so a run cut off by a time limit keeps what it measured) and one
PNG per shape (tokens/s against tau) under ``--out``: a new or empty folder, or one a previous run wrote (it holds
results.json, written first); a folder holding anything else, or a path that cannot be a folder, is refused
before any work, as is a ``--checkpoints`` path that cannot be one.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from draftsmith.bench import _median_time
from draftsmith.bench_out import RESULTS, check_folders
from draftsmith.errors import OptionError

SHAPES = {  # Llama-3.2-1B, Llama-3.1-8B; tiny runs on a CPU in seconds
    "tiny": dict(hidden_size=256, intermediate_size=768, num_attention_heads=8, num_key_value_heads=2,
                 num_hidden_layers=8, vocab_size=8192, draft_vocab=2048, tie=False),
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=32, num_key_value_heads=8,
               num_hidden_layers=16, vocab_size=128256, draft_vocab=32000, tie=True),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
               num_hidden_layers=32, vocab_size=128256, draft_vocab=32000, tie=False),
}
METHODS = {"chain 6": dict(topk=1, steps=5), "tree 8": dict(topk=4, steps=5, draft_tokens=8),
           "tree 32": dict(topk=8, steps=6, draft_tokens=32)}
TAUS = (3.0, 4.0, 6.0)


# --- checkpoints -------------------------------------------------------------------------------------------
def write_llama(folder: Path, shape: dict, device: str, seed: int = 0, shard_bytes: int = 2 << 30) -> Path:
    """A random Llama target (bf16, sharded safetensors + index, HF names); kept if already written."""
    from safetensors.torch import save_file
    from transformers import LlamaConfig

    if (folder / "config.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    H, nH = shape["hidden_size"], shape["num_attention_heads"]
    nKV, inter, L, V = shape["num_key_value_heads"], shape["intermediate_size"], shape["num_hidden_layers"], \
        shape["vocab_size"]
    d = H // nH
    g = torch.Generator(device).manual_seed(seed)

    def w(*s, std=0.02):
        return (torch.randn(*s, generator=g, device=device) * std).to(torch.bfloat16).cpu()

    def norm():
        return (1 + torch.randn(H, generator=g, device=device) * 0.01).to(torch.bfloat16).cpu()

    names = [("model.embed_tokens.weight", lambda: w(V, H))]
    for i in range(L):
        p = f"model.layers.{i}."
        names += [(p + "self_attn.q_proj.weight", lambda: w(nH * d, H)),
                  (p + "self_attn.k_proj.weight", lambda: w(nKV * d, H)),
                  (p + "self_attn.v_proj.weight", lambda: w(nKV * d, H)),
                  (p + "self_attn.o_proj.weight", lambda: w(H, nH * d)),
                  (p + "mlp.gate_proj.weight", lambda: w(inter, H)), (p + "mlp.up_proj.weight", lambda: w(inter, H)),
                  (p + "mlp.down_proj.weight", lambda: w(H, inter)), (p + "input_layernorm.weight", norm),
                  (p + "post_attention_layernorm.weight", norm)]
    names += [("model.norm.weight", norm)] + ([] if shape["tie"] else [("lm_head.weight", lambda: w(V, H))])
    weight_map, shard, size, n = {}, {}, 0, 0

    def flush():
        nonlocal shard, size, n
        if shard:
            n += 1
            save_file(shard, str(folder / f"model-{n:05d}.safetensors"), metadata={"format": "pt"})
            weight_map.update({k: f"model-{n:05d}.safetensors" for k in shard})
            shard, size = {}, 0

    for name, make in names:
        t = make()
        shard[name] = t
        size += t.numel() * t.element_size()
        if size >= shard_bytes:
            flush()
    flush()
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    LlamaConfig(hidden_size=H, intermediate_size=inter, num_attention_heads=nH, num_key_value_heads=nKV,
                num_hidden_layers=L, vocab_size=V, head_dim=d, max_position_embeddings=8192, rope_theta=500000.0,
                rms_norm_eps=1e-5, tie_word_embeddings=shape["tie"], bos_token_id=0, eos_token_id=1,
                dtype="bfloat16").save_pretrained(folder)
    return folder


def write_pair(root: Path, name: str, device: str) -> tuple[Path, Path]:
    from draftsmith.testing import write_eagle3

    shape = SHAPES[name]
    target = write_llama(root / f"{name}-target", shape, device)
    draft = root / f"{name}-draft"
    if not (draft / "config.json").exists():
        write_eagle3(draft, target, draft_vocab=shape["draft_vocab"], std=0.02)
    return target, draft


# --- timing ------------------------------------------------------------------------------------------------
def back_to_back_ms(fn, device: str, rounds: int, reps: int = 20) -> float:
    """ms per call of ``fn`` run ``reps`` times back to back (median over ``rounds``), after one untimed call.
    On CUDA timed by events on the stream, so the host's launch and clock round trips overlap the device work as
    in a real decode loop instead of adding ~20-40 us to each short call (a draft forward is ~0.5 ms at 8B)."""
    import statistics
    import time

    fn()
    times = []
    for _ in range(rounds):
        if torch.device(device).type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / reps)
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            times.append((time.perf_counter() - t0) * 1e3 / reps)
    return statistics.median(times)


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


def forward_ms(runner, T: int, B: int, prefix: int, device: str, repeats: int, hidden: torch.Tensor | None = None):
    """ms of one runner forward over T new tokens per row after `prefix` committed ones (a CUDA graph on CUDA)."""
    from draftsmith.decoding.graphs import Replay
    from draftsmith.decoding.stats import Stats

    runner.stats = Stats()  # time into a scratch record, not into the statistics of the last generate call
    ar = torch.arange(T, device=device)
    ids = torch.zeros(B, T, dtype=torch.long, device=device)
    args = (ar.expand(B, T), ar.expand(B, T), (ar[:, None] >= ar[None, :]).expand(B, T, T))
    runner.pool.lens.fill_(prefix)
    if hidden is None:
        fwd = Replay(runner, torch.device(device).type == "cuda")
        fn = lambda: fwd(ids, *args)  # noqa: E731
    else:
        fwd = Replay(lambda *a: runner(*a, from_target=False), torch.device(device).type == "cuda")
        fn = lambda: fwd(ids, hidden[:, :1].expand(B, T, -1).contiguous(), *args)  # noqa: E731
    return back_to_back_ms(fn, device, rounds=max(repeats, 3))


# --- one shape ---------------------------------------------------------------------------------------------
def measure(name: str, root: Path, *, device: str, dtype: str, batches=(1, 8), prompt_len=128, new_tokens=128,
            repeats=3, hf: bool = True, graphs: str = "auto", log=print, save=lambda partial: None) -> dict:
    """One shape's table; ``save(partial)`` is called after every row, so a run cut off by a time limit keeps
    what it measured."""
    import draftsmith
    from draftsmith.specs.loader import load_spec

    target_dir, draft_dir = write_pair(root, name, device)
    spec = load_spec("eagle3-llama").with_decoding(graphs=graphs)
    model = draftsmith.assemble(spec, target=target_dir, draft=draft_dir, device=device, dtype=dtype)
    bw = copy_bandwidth(device)
    wbytes = weight_bytes(model.target)
    out = {"shape": name, "device": device, "dtype": dtype, "weight_bytes": wbytes, "copy_bandwidth": bw,
           "prompt_len": prompt_len, "new_tokens": new_tokens, "batches": {}}
    g = torch.Generator().manual_seed(0)
    V = SHAPES[name]["vocab_size"]
    for B in batches:
        prompts = torch.randint(2, V, (B, prompt_len), generator=g).tolist()
        rows = out["batches"][B] = {"bandwidth limit": {"tok_s": B * bw / wbytes}}
        kw = dict(stop=[])
        t1, _ = _median_time(lambda: model.generate_baseline(prompts, max_new_tokens=1, **kw), repeats, device)
        tn, _ = _median_time(lambda: model.generate_baseline(prompts, max_new_tokens=new_tokens, **kw), repeats,
                             device)
        base = (tn - t1) / (new_tokens - 1)
        rows["draftsmith target-only"] = {"step_ms": base * 1e3, "tok_s": B / base}
        log(f"  {name} B={B} target-only {base * 1e3:.2f} ms/step")
        save(out)
        for label, plan in METHODS.items():
            t1, _ = _median_time(lambda: model.generate(prompts, max_new_tokens=1, **plan, **kw), repeats, device)
            tn, res = _median_time(lambda: model.generate(prompts, max_new_tokens=new_tokens, **plan, **kw),
                                   repeats, device)
            stats = res[0].stats
            step = (tn - t1) / stats.target_forwards
            p = model.plan(**plan)
            with torch.inference_mode():  # the runners of that run (and their graphs), one forward at a time
                target_r, draft_r = model._runners(prompts, new_tokens, p)
                hidden = torch.zeros(B, 1, model.draft.fc.out_features, dtype=model.dtype, device=device)
                verify_ms = forward_ms(target_r, p.draft_tokens, B, prompt_len, device, repeats)
                decode_ms = forward_ms(target_r, 1, B, prompt_len, device, repeats)   # the same target, one token
                draft_ms = forward_ms(draft_r, p.topk, B, prompt_len, device, repeats, hidden)
            rows[f"draftsmith {label}"] = {
                "step_ms": step * 1e3, "x_target_only": step / base, "tau_measured": stats.acceptance_length,
                "verify_forward_ms": verify_ms, "verify_x_decode_forward": verify_ms / decode_ms,
                "draft_forward_ms": draft_ms, "tau_max": p.steps + 1,
                "bookkeeping_share": stats.bookkeeping_share if device == "cpu" else None,
                "addressing_share": stats.addressing_share if device == "cpu" else None,
                **{f"tok_s_tau{t:g}": B * t / step for t in TAUS}}
            rows[f"draftsmith {label}"]["draft_x_target_only"] = rows[f"draftsmith {label}"]["draft_forward_ms"] / (
                base * 1e3)
            log(f"  {name} B={B} {label} {step * 1e3:.2f} ms/step ({step / base:.2f}x)")
            save(out)
        if hf:
            rows |= hf_rows(target_dir, prompts, device, dtype, new_tokens, repeats, log)
            save(out)
    del model
    return out


def hf_rows(target_dir: Path, prompts, device: str, dtype: str, new_tokens: int, repeats: int, log) -> dict:
    from transformers import AutoModelForCausalLM

    from draftsmith.assembler.assemble import parse_dtype
    from draftsmith.hub import quiet_transformers

    with quiet_transformers(bars=False):   # its loading bar would break into the bench's log
        hf = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=parse_dtype(dtype)).to(device).eval()
    x = torch.tensor(prompts, device=device)
    B, rows = x.shape[0], {}
    for label, extra in (("transformers generate (dynamic cache)", {}),
                         ("transformers generate (static cache" + (", compiled)" if device != "cpu" else ")"),
                          {"cache_implementation": "static"})):
        def run(n):
            with torch.inference_mode():
                return hf.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0, **extra)
        try:
            t1, _ = _median_time(lambda: run(1), repeats, device)
            tn, _ = _median_time(lambda: run(new_tokens), repeats, device)
        except Exception as e:  # noqa: BLE001 - a peer that fails is reported, not fatal
            rows[label] = {"error": f"{type(e).__name__}: {e}"[:200]}
            continue
        step = (tn - t1) / (new_tokens - 1)
        rows[label] = {"step_ms": step * 1e3, "tok_s": B / step}
        log(f"  HF B={B} {label}: {step * 1e3:.2f} ms/step")
    del hf
    return rows


# --- report ------------------------------------------------------------------------------------------------
def _fmt(x, spec=".2f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(results: list[dict]) -> str:
    lines = []
    for r in results:
        lines += [f"## {r['shape']} ({r['device']}, {r['dtype']}, prompt {r['prompt_len']}, "
                  f"{r['new_tokens']} new tokens; weights {r['weight_bytes'] / 1e9:.2f} GB, "
                  f"copy bandwidth {r['copy_bandwidth'] / 1e9:.0f} GB/s)", ""]
        for B, rows in r["batches"].items():
            lines += [f"### batch {B}", "",
                      "| method | ms / step | x target-only step | verify fwd ms (x decode fwd) "
                      "| draft fwd ms (x target step) "
                      "| outside forwards | tok/s | " + " | ".join(f"tok/s @ tau {t:g}" for t in TAUS) + " |",
                      "|---" * (7 + len(TAUS)) + "|"]
            for name, m in rows.items():
                if "error" in m:
                    lines.append(f"| {name} | {m['error']} |" + " |" * (6 + len(TAUS)))
                    continue
                draft = (f"{m['draft_forward_ms']:.2f} ({m['draft_x_target_only']:.3f}x)"
                         if "draft_forward_ms" in m else "-")
                verify = (f"{m['verify_forward_ms']:.2f} ({m['verify_x_decode_forward']:.2f}x)"
                          if "verify_forward_ms" in m else "-")
                share = ("-" if m.get("bookkeeping_share") is None else
                         f"{100 * m['bookkeeping_share']:.1f}% (+{100 * m['addressing_share']:.1f}% KV)")
                lines.append(f"| {name} | {_fmt(m.get('step_ms'))} | {_fmt(m.get('x_target_only'))} | "
                             f"{verify} | {draft} | {share} | "
                             f"{_fmt(m.get('tok_s'), '.1f')} | " + " | ".join(_projected(m, t) for t in TAUS) + " |")
            lines.append("")
    return "\n".join(lines)


def _projected(m: dict, tau: float) -> str:
    """tok/s at ``tau``; past what the method's depth can accept (steps + 1), '-'; at exactly that, marked max
    (every draft token accepted: a ceiling, not a forecast)."""
    if f"tok_s_tau{tau:g}" not in m:
        return _fmt(m.get("tok_s"), ".1f")
    if tau > m["tau_max"]:
        return "-"
    return _fmt(m[f"tok_s_tau{tau:g}"], ".1f") + (" (max)" if tau == m["tau_max"] else "")


def plot(result: dict, path: Path) -> Path | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the optional extra: pip install 'draftsmith[bench]'
        return None
    batches = list(result["batches"])
    fig, axes = plt.subplots(1, len(batches), figsize=(6 * len(batches), 4.5), squeeze=False)
    taus = [1.0 + 0.25 * i for i in range(25)]
    for ax, B in zip(axes[0], batches):
        for name, m in result["batches"][B].items():
            if "step_ms" in m and "x_target_only" in m:
                reach = [t for t in taus if t <= m.get("tau_max", taus[-1])]   # tau past the depth: not reachable
                ax.plot(reach, [B * t / (m["step_ms"] / 1e3) for t in reach], label=name)
            elif "tok_s" in m:
                ax.plot(taus, [m["tok_s"]] * len(taus), "--", label=name)
        ax.set(title=f"{result['shape']}, batch {B} ({result['device']}, {result['dtype']})",
               xlabel="tau (tokens per verification step)", ylabel="tokens / s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def compile_summary() -> dict:
    """What torch.compile did in this process so far: graphs compiled (every variant of every fused function)
    and the seconds spent compiling them (dynamo and its backend), the first thing to read when a stage is slow."""
    from torch._dynamo.utils import compile_times, counters

    names, seconds = compile_times(repr="csv", aggregate=True)
    spent = float(dict(zip(names, seconds)).get("_compile.compile_inner", 0.0))
    return {"graphs": int(counters["stats"]["unique_graphs"]), "seconds": round(spent, 1)}


def run_scale(shapes=("tiny",), out: str | Path = "bench-scale", *, device="cpu", dtype=None, batches=(1, 8),
              prompt_len=None, new_tokens=None, repeats=3, hf=True, graphs="auto", checkpoints=None,
              log=print) -> list[dict]:
    if unknown := [n for n in shapes if n not in SHAPES]:   # every name, before the first shape runs for minutes
        raise OptionError(f"unknown shape {', '.join(map(repr, unknown))}; known: {', '.join(SHAPES)}")
    out = Path(out)
    checkpoints = Path(checkpoints) if checkpoints else out / "checkpoints"
    check_folders(out, checkpoints, shapes)   # before anything is written or measured
    out.mkdir(parents=True, exist_ok=True)
    if not (out / RESULTS).exists():   # marks the folder as a bench's from the start (a run cut off while it writes
        (out / RESULTS).write_text("[]\n")   # the checkpoints is one a rerun may use)
    cuda = torch.device(device).type == "cuda"
    dtype = dtype or ("bfloat16" if cuda else "float32")
    results = []
    for name in shapes:
        small = name == "tiny" and not cuda

        def save(partial, done=tuple(results)):   # the shapes finished so far and this one as far as it got
            partial["compile"] = compile_summary()   # so a run cut off mid-shape still says what compiling cost
            (out / RESULTS).write_text(json.dumps([*done, partial], indent=1, default=str))
            (out / "results.md").write_text(markdown([*done, partial]))

        r = measure(name, checkpoints, device=device, dtype=dtype, batches=batches,
                    prompt_len=prompt_len or (32 if small else 128), new_tokens=new_tokens or (24 if small else 128),
                    repeats=repeats, hf=hf, graphs=graphs, log=log, save=save)
        r["compile"] = compile_summary()
        log(f"  {name}: torch.compile so far: {r['compile']['graphs']} graphs, {r['compile']['seconds']} s compiling")
        results.append(r)
        plot(r, out / f"{name}.png")
        save(r, tuple(results[:-1]))
    return results
