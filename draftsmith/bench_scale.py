"""bench_scale: draftsmith against the memory-bandwidth limit and transformers, on random weights in real Llama-3.x
shapes (``draftsmith bench --scale 1b,8b``, ``python benchmarks/bench_scale.py``).

For each shape it writes (once, under ``--checkpoints``, by default OUT/checkpoints) a random Llama target in the Hugging Face layout and an
EAGLE-3 draft in the ``midlayer.*`` layout with a reduced vocabulary, assembles them through
``assemble("eagle3-llama")`` and measures, side by side in one process, at batch 1 and 8:

* the bandwidth limit of target-only decoding: the bytes a decode step reads (every target weight once; an
  untied input embedding not at all, since a step reads one row of it) over the measured device copy bandwidth
  (read + write), as ms per step and tok/s;
* draftsmith target-only, a chain of 6 nodes and trees of 8 and 32 nodes (nodes count the root: the chain
  verifies the root and 5 drafted tokens, the trees the root and 7 or 31), each row with these ratios:

  - ``x target-only step`` = the method's ms per step / target-only's ms per step: whole steps (draft forwards,
    tree, verdict, compaction, catch-up and the host sync included) over whole decode steps;
  - ``verify fwd ms (x decode fwd)`` = one target forward over the method's tree (the verification forward,
    gathering the draft's taps) / one target forward over one token per row without the taps (the forward
    target-only decoding runs, ``hand_over=False``), measured once per batch in the same rounds as every
    verification and draft forward. Issue 10's "a tree verification step of 8 nodes <= 1.15x a target-only
    step" is read on this column: its own arithmetic (1.15 + 5 draft forwards x 0.06 = 1.45, tau 4 / 1.45 =
    2.76 >= 2.5) puts the draft forwards in a target of their own, so its 1.15x is the verification forward's;
    the whole step is the ``x target-only step`` column;
  - ``draft fwd ms (x target-only step)`` = one draft forward (one expansion, topk tokens per row) / target-only's
    ms per step (results.json also has it / the decode forward: ``draft_x_decode_forward``);
  - decode time outside forwards: the share of a run's wall time after the prefill spent outside model forwards
    (:attr:`~draftsmith.decoding.stats.Stats.decode_bookkeeping_share`), and in brackets the share its forwards
    spent on the KV pool's addressing and masks (inside the forwards, so not in the first figure); on CPU only,
    where host time is compute time;

* transformers ``generate`` with its dynamic cache (eager) and its static cache (which transformers compiles on
  CUDA: the row says ", compiled" when it did, and results.json has ``compiled``);
* tokens/s projected at tau = 3, 4, 6 from the measured step costs (B * tau / step) for the speculative rows
  ("-" on the others, whose tok/s is measured); past a method's deepest acceptance (steps + 1) nothing is
  projected, and at exactly that the figure is marked (max): a ceiling.

A step's cost is (time of N new tokens - time of 1 new token) / the N-token run's steps, so prefill drops out;
the runs of 1 and N tokens of every method take turns (after one untimed run each), the step cost is the median
over rounds of that round's difference, and the raw times are kept. (A 1-token run skips the draft's prefill
forward, which is thus spread over the N-token run's steps: < 0.1% of a step at 1B and 8B with 128 new tokens.)
Single forwards are timed back to back (20 per turn), on CUDA as replays of their CUDA graph timed with events,
not one at a time by the host clock, whose round trip is 5-10% of an 8B draft forward. Random drafts accept
~nothing, which is why speculative speed is projected from step costs rather than measured.

Writes results.json (the per-round samples, the versions, device, threads and graphs setting included),
results.md (after each phase of each batch, so a run cut off by a time limit keeps what it measured) and one PNG
per shape (tokens/s against tau) under ``--out``: a new or empty folder, or one a previous run wrote (it holds
results.json, written first; the shapes it holds that this run does not measure stay in results.json and
results.md); a folder holding anything else, or a path that cannot be a folder, is refused before any work, as is
a ``--checkpoints`` path that cannot be one.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import torch

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
    fwd = Replay(call, cuda)
    fwd(*args)   # on CUDA: warm-up runs and the capture
    captured = next(iter(fwd.graphs.values()), None)
    if captured is not None:
        return captured.graph.replay, "graph replay"
    return (lambda: call(*args)), "eager"


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


# --- one shape ---------------------------------------------------------------------------------------------
LIMIT = "bandwidth limit (target-only)"


def measure(name: str, root: Path, *, device: str, dtype: str, batches=(1, 8), prompt_len=128, new_tokens=128,
            repeats=3, hf: bool = True, graphs: str = "auto", log=print, save=lambda partial: None) -> dict:
    """One shape's table; ``save(partial)`` is called after each phase of a batch (whole runs, single forwards,
    transformers' rows), so a run cut off by a time limit keeps what it measured."""
    import transformers

    import draftsmith
    from draftsmith.bench import _turns
    from draftsmith.decoding.graphs import graphs_enabled
    from draftsmith.specs.loader import load_spec

    target_dir, draft_dir = write_pair(root, name, device)
    spec = load_spec("eagle3-llama").with_decoding(graphs=graphs)
    model = draftsmith.assemble(spec, target=target_dir, draft=draft_dir, device=device, dtype=dtype)
    bw = copy_bandwidth(device)
    wbytes = weight_bytes(model.target)
    out = {"shape": name, "device": device, "device_name": device_name(device), "dtype": dtype,
           "torch": torch.__version__, "transformers": transformers.__version__, "threads": torch.get_num_threads(),
           "graphs": graphs, "graphs_enabled": graphs_enabled(graphs, device), "repeats": repeats,
           "weight_bytes": wbytes, "copy_bandwidth": bw, "prompt_len": prompt_len, "new_tokens": new_tokens,
           "batches": {}}
    g = torch.Generator().manual_seed(0)
    V = SHAPES[name]["vocab_size"]
    cpu = torch.device(device).type == "cpu"
    for B in batches:
        prompts = torch.randint(2, V, (B, prompt_len), generator=g).tolist()
        rows = out["batches"][B] = {LIMIT: {"step_ms": wbytes / bw * 1e3, "tok_s": B * bw / wbytes}}
        # 1. whole runs of 1 and of new_tokens tokens, every method's, taking turns (t1, tn of one method side by
        #    side), so a drift of the device's speed enters neither a step cost nor a ratio of two
        kw = dict(stop=[])
        runs = {}
        for label, plan in {"target-only": None, **METHODS}.items():
            for n in (1, new_tokens):
                runs[label, n] = (functools.partial(model.generate_baseline, prompts, max_new_tokens=n, **kw)
                                  if plan is None else
                                  functools.partial(model.generate, prompts, max_new_tokens=n, **plan, **kw))
        timed = _turns(runs, repeats, device)
        for label in ("target-only", *METHODS):
            (t1, r1), (tn, rn) = timed[label, 1], timed[label, new_tokens]
            stats = rn[0].stats
            forwards = stats.target_forwards - r1[0].stats.target_forwards   # decode / verification steps
            steps = [(b - a) / forwards * 1e3 for a, b in zip(t1, tn)]       # ms, one per round
            row = rows[f"draftsmith {label}"] = {
                "step_ms": _median(steps), "step_samples_ms": steps, "t1_s": t1, "tn_s": tn,
                "target_forwards": forwards, "tau_measured": stats.acceptance_length,
                # on CPU only: the host timers time compute there (CUDA: launches; whole-step graphs: none)
                "bookkeeping_share": stats.decode_bookkeeping_share if cpu else None,
                "addressing_share": stats.decode_addressing_share if cpu else None}
            if label == "target-only":
                row["tok_s"] = B / (row["step_ms"] / 1e3)
                base = row["step_ms"]
                log(f"  {name} B={B} target-only {base:.2f} ms/step")
                continue
            step = row["step_ms"]
            row |= {"x_target_only": step / base, "tau_max": METHODS[label]["steps"] + 1,
                    **{f"tok_s_tau{t:g}": B * t / (step / 1e3) for t in TAUS}}
            log(f"  {name} B={B} {label} {step:.2f} ms/step ({step / base:.2f}x)")
        save(out)
        # 2. single forwards on the runners (and KV pools) of those runs: the one-token decode forward once
        #    (hand_over False, as target-only decoding runs it: the denominator of every "x decode fwd"), each
        #    method's verification forward over its tree and its draft forward, all taking turns
        with torch.inference_mode():
            fns, how = {}, {}
            base_r, _ = model._runners(prompts, new_tokens)
            fns["decode"], how["decode"] = forward_call(base_r, 1, B, prompt_len, device, hand_over=False)
            hidden = torch.zeros(B, 1, model.draft.fc.out_features, dtype=model.dtype, device=device)
            for label, plan in METHODS.items():
                p = model.plan(**plan)
                target_r, draft_r = model._runners(prompts, new_tokens, p)
                fns[label, "verify"], how[label, "verify"] = forward_call(target_r, p.draft_tokens, B, prompt_len,
                                                                          device)
                fns[label, "draft"], how[label, "draft"] = forward_call(draft_r, p.topk, B, prompt_len, device,
                                                                        hidden)
            samples = turns_ms(fns, device, rounds=max(repeats, 3))
        decode = _median(samples["decode"])
        rows["draftsmith target-only"] |= {"decode_forward_ms": decode, "decode_forward_samples_ms": samples["decode"],
                                           "decode_forward_timed": how["decode"]}
        for label in METHODS:
            row = rows[f"draftsmith {label}"]
            verify, draft = _median(samples[label, "verify"]), _median(samples[label, "draft"])
            row |= {"verify_forward_ms": verify, "verify_forward_samples_ms": samples[label, "verify"],
                    "decode_forward_ms": decode, "verify_x_decode_forward": verify / decode,
                    "draft_forward_ms": draft, "draft_forward_samples_ms": samples[label, "draft"],
                    "draft_x_target_only": draft / base, "draft_x_decode_forward": draft / decode,
                    "forwards_timed": how[label, "verify"]}
        log(f"  {name} B={B} one-token decode forward {decode:.2f} ms; verify forwards "
            + ", ".join(f"{label} {rows[f'draftsmith {label}']['verify_x_decode_forward']:.2f}x" for label in METHODS))
        save(out)
        if hf:
            rows |= hf_rows(target_dir, prompts, device, dtype, new_tokens, repeats, log)
            save(out)
    del model
    return out


def hf_rows(target_dir: Path, prompts, device: str, dtype: str, new_tokens: int, repeats: int, log) -> dict:
    """transformers ``generate`` with its dynamic cache and its static one, runs of 1 and of new_tokens tokens
    taking turns as draftsmith's do. The static row says whether transformers compiled its forward (it does on
    CUDA: ``compiled``, its ``_compiled_call`` made at the first decoding step; ``graphs_compiled``, what
    torch.compile counted during the warm-up runs) and is named after what happened."""
    from transformers import AutoModelForCausalLM

    from draftsmith.assembler.assemble import parse_dtype
    from draftsmith.bench import _turns
    from draftsmith.hub import quiet_transformers

    with quiet_transformers(bars=False):   # its loading bar would break into the bench's log
        hf = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=parse_dtype(dtype)).to(device).eval()
    x = torch.tensor(prompts, device=device)
    B, rows, runs = x.shape[0], {}, {}

    def run(n, extra):
        with torch.inference_mode():
            return hf.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0, **extra)

    compiled = {}   # label -> graphs torch.compile made during its warm-up runs (a witness beside _compiled_call)
    for cache, extra in (("dynamic", {}), ("static", {"cache_implementation": "static"})):
        label = f"transformers generate ({cache} cache)"
        before = compile_summary()["graphs"]
        try:   # the warm-up runs, one per length (a static cache's first decoding step compiles on CUDA)
            for n in (1, new_tokens):
                runs[label, n] = functools.partial(run, n, extra)
                runs[label, n]()
            compiled[label] = compile_summary()["graphs"] - before
        except Exception as e:  # noqa: BLE001 - a peer that fails is reported, not fatal
            rows[label] = {"error": f"{type(e).__name__}: {e}"[:200]}
            runs = {k: v for k, v in runs.items() if k[0] != label}
    try:
        timed = _turns(runs, repeats, device, warm_up=False)
    except Exception as e:  # noqa: BLE001
        timed, rows = {}, rows | {label: {"error": f"{type(e).__name__}: {e}"[:200]} for label, _ in runs}
    for label in dict.fromkeys(label for label, _ in timed):
        t1, tn = timed[label, 1][0], timed[label, new_tokens][0]
        steps = [(b - a) / (new_tokens - 1) * 1e3 for a, b in zip(t1, tn)]
        row = {"step_ms": _median(steps), "step_samples_ms": steps, "t1_s": t1, "tn_s": tn,
               "target_forwards": new_tokens - 1}
        row["tok_s"] = B / (row["step_ms"] / 1e3)
        row["graphs_compiled"] = compiled[label]
        if "static" in label:
            row["compiled"] = hasattr(hf, "_compiled_call")
            label = label[:-1] + ", compiled)" if row["compiled"] else label
        rows[label] = row
        log(f"  HF B={B} {label}: {row['step_ms']:.2f} ms/step")
    return rows   # the model goes with this frame (the runs' closures are its only other holders)


# --- report ------------------------------------------------------------------------------------------------
COLUMNS = ("method", "ms / step", "x target-only step", "verify fwd ms (x decode fwd)",
           "draft fwd ms (x target-only step)", "decode time outside forwards (+ KV addressing, inside forwards)",
           "tok/s", *(f"tok/s @ tau {t:g}" for t in TAUS))


def _fmt(x, spec=".2f") -> str:
    return "-" if x is None else format(x, spec)


def _cells(name: str, m: dict) -> list[str]:
    if "error" in m:
        return [name, m["error"], *["-"] * (len(COLUMNS) - 2)]
    draft = (f"{m['draft_forward_ms']:.2f} ({m['draft_x_target_only']:.3f}x)" if "draft_forward_ms" in m else "-")
    verify = (f"{m['verify_forward_ms']:.2f} ({m['verify_x_decode_forward']:.2f}x)"
              if "verify_forward_ms" in m else "-")
    share = ("-" if m.get("bookkeeping_share") is None else
             f"{100 * m['bookkeeping_share']:.1f}% (+{100 * m['addressing_share']:.1f}%)")
    return [name, _fmt(m.get("step_ms")), _fmt(m.get("x_target_only")), verify, draft, share,
            _fmt(m.get("tok_s"), ".1f"), *(_projected(m, t) for t in TAUS)]


def markdown(results: list[dict]) -> str:
    lines = []
    for r in results:
        about = ", ".join(x for x in (
            r.get("device_name"), r.get("torch") and f"torch {r['torch']}",
            r.get("transformers") and f"transformers {r['transformers']}",
            r.get("threads") and f"{r['threads']} thread{'s' * (r['threads'] != 1)}",
            r.get("graphs") and f"graphs {r['graphs']} ({'on' if r.get('graphs_enabled') else 'off'})",
            r.get("repeats") and f"median of {r['repeats']} round{'s' * (r['repeats'] != 1)} after a warm-up")
            if x)
        lines += [(f"## {r['shape']} ({r.get('device')}, {r.get('dtype')}, prompt {r.get('prompt_len')}, "
                   f"{r.get('new_tokens')} new tokens; weights {r.get('weight_bytes', 0) / 1e9:.2f} GB, "
                   f"copy bandwidth {r.get('copy_bandwidth', 0) / 1e9:.0f} GB/s)"), ""]
        if about:
            lines += [about, ""]
        lines += [NOTE, ""]
        for B, rows in r["batches"].items():
            decode = rows.get("draftsmith target-only", {}).get("decode_forward_ms")
            lines += [f"### batch {B}" + ("" if decode is None else
                                          f" (one-token decode forward {decode:.2f} ms: the x decode fwd unit)"), "",
                      "| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
            lines += ["| " + " | ".join(_cells(name, m)) + " |" for name, m in rows.items()]
            lines.append("")
    return "\n".join(lines)


NOTE = ("Nodes count the root: chain 6 verifies the root and 5 drafted tokens, tree 8 the root and 7, tree 32 the "
        "root and 31. x target-only step: ms / step over the target-only ms / step (whole steps, draft forwards "
        "included). verify fwd: one target forward over the tree (taps gathered), x the one-token decode forward "
        "(taps not gathered, as target-only decoding runs it), both timed in the same rounds. draft fwd: one draft "
        "forward (one expansion), x the target-only ms / step. Decode time outside forwards: the share of a run's "
        "wall time after the prefill spent outside model forwards; in brackets the share spent on the KV pool's "
        "addressing and masks, which is inside the forwards (CPU only: on CUDA the host timers time launches).")


def _projected(m: dict, tau: float) -> str:
    """tok/s at ``tau`` for a speculative row; '-' for a row that does not speculate (its tok/s column says its
    speed) and past what the method's depth can accept (steps + 1); at exactly that, marked max (every draft
    token accepted: a ceiling, not a forecast)."""
    if f"tok_s_tau{tau:g}" not in m or tau > m["tau_max"]:
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


def _previous(out: Path) -> list[dict]:
    """The shapes a previous run wrote into ``out``'s results.json ([] if none, or not readable as one)."""
    try:
        runs = json.loads((out / RESULTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [r for r in runs if isinstance(r, dict) and isinstance(r.get("shape"), str)
            and isinstance(r.get("batches"), dict)] if isinstance(runs, list) else []


def run_scale(shapes=("tiny",), out: str | Path = "bench-scale", *, device="cpu", dtype=None, batches=(1, 8),
              prompt_len=None, new_tokens=None, repeats=3, hf=True, graphs="auto", checkpoints=None,
              log=print) -> list[dict]:
    """This run's results (a dict per shape). results.json and results.md hold them after the shapes a previous
    run wrote into ``out`` that this one does not measure again (a shape measured again is replaced)."""
    if unknown := [n for n in shapes if n not in SHAPES]:   # every name, before the first shape runs for minutes
        raise OptionError(f"unknown shape {', '.join(map(repr, unknown))}; known: {', '.join(SHAPES)}")
    out = Path(out)
    checkpoints = Path(checkpoints) if checkpoints else out / "checkpoints"
    check_folders(out, checkpoints, shapes)   # before anything is written or measured
    out.mkdir(parents=True, exist_ok=True)
    kept = [r for r in _previous(out) if r["shape"] not in shapes]   # other shapes measured into this folder
    if not (out / RESULTS).exists():   # marks the folder as a bench's from the start (a run cut off while it writes
        (out / RESULTS).write_text("[]\n")   # the checkpoints is one a rerun may use)
    cuda = torch.device(device).type == "cuda"
    dtype = dtype or ("bfloat16" if cuda else "float32")
    results = []
    for name in shapes:
        small = name == "tiny" and not cuda

        def save(partial, done=tuple(results)):   # the shapes finished so far and this one as far as it got
            partial["compile"] = compile_summary()   # so a run cut off mid-shape still says what compiling cost
            (out / RESULTS).write_text(json.dumps([*kept, *done, partial], indent=1, default=str))
            (out / "results.md").write_text(markdown([*kept, *done, partial]))

        r = measure(name, checkpoints, device=device, dtype=dtype, batches=batches,
                    prompt_len=prompt_len or (32 if small else 128), new_tokens=new_tokens or (24 if small else 128),
                    repeats=repeats, hf=hf, graphs=graphs, log=log, save=save)
        r["compile"] = compile_summary()
        log(f"  {name}: torch.compile so far: {r['compile']['graphs']} graphs, {r['compile']['seconds']} s compiling")
        results.append(r)
        plot(r, out / f"{name}.png")
        save(r, tuple(results[:-1]))
    return results
