"""One scale benchmark run: each shape's pair written, assembled and measured side by side (:func:`measure`, with
transformers' rows from :func:`hf_rows`), and results.json, results.md and the PNGs written as it goes
(:func:`run_scale`)."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import torch

from draftsmith.bench_out import RESULTS, check_folders, write_atomic
from draftsmith.components import gemv
from draftsmith.errors import OptionError
from draftsmith.scale.checkpoints import SHAPES, write_pair
from draftsmith.scale.report import TAUS, markdown, plot
from draftsmith.scale.timing import (_median, compile_summary, copy_bandwidth, device_name, forward_call, turns_ms,
                                     weight_bytes)

METHODS = {"chain 6": dict(topk=1, steps=5), "tree 8": dict(topk=4, steps=5, draft_tokens=8),
           "tree 32": dict(topk=8, steps=6, draft_tokens=32)}
LIMIT = "bandwidth limit (target-only)"
PARTIAL = "(partial: measuring"   # results.md's first line while a run is in progress: "(partial: measuring 1b; ..."


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
            stats = rn[-1][0].stats                    # the last round's: its counts are every round's (greedy)
            forwards = stats.target_forwards - r1[-1][0].stats.target_forwards   # decode / verification steps
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


def _previous(out: Path, log=print) -> list[dict]:
    """The shapes a previous run wrote into ``out``'s results.json ([] if none, or not readable as one); a shape
    this report cannot show (written by an older draftsmith, whose rows lack later columns) is left out, said; so
    is the partial entry of a run cut off where that shape's previous complete results were kept beside it."""
    try:
        runs = json.loads((out / RESULTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    kept = []
    for r in runs if isinstance(runs, list) else []:
        if not (isinstance(r, dict) and isinstance(r.get("shape"), str) and isinstance(r.get("batches"), dict)):
            continue
        try:
            markdown([r])
        except (KeyError, TypeError, ValueError, AttributeError):
            log(f"  {r['shape']}: the previous results in {out / RESULTS} are not in this version's form; left out")
            continue
        kept.append(r)
    complete = {r["shape"] for r in kept if not r.get("partial")}
    return [r for r in kept if not (r.get("partial") and r["shape"] in complete)]


def run_scale(shapes=("tiny",), out: str | Path = "bench-scale", *, device="cpu", dtype=None, batches=(1, 8),
              prompt_len=None, new_tokens=None, repeats=3, hf=True, graphs="auto", checkpoints=None,
              log=print) -> list[dict]:
    """This run's results (a dict per shape). results.json and results.md hold them after the shapes a previous
    run wrote into ``out`` that this one does not measure again. A shape measured again keeps its previous complete
    results (and PNG) until its new ones are complete: a rerun cut off loses nothing, and its entry so far is
    marked ``"partial": true`` beside them."""
    if unknown := [n for n in shapes if n not in SHAPES]:   # every name, before the first shape runs for minutes
        raise OptionError(f"unknown shape {', '.join(map(repr, unknown))}; known: {', '.join(SHAPES)}")
    shapes = list(dict.fromkeys(shapes))   # a shape named twice is measured once (its rows would be written twice)
    out = Path(out)
    checkpoints = Path(checkpoints) if checkpoints else out / "checkpoints"
    check_folders(out, checkpoints, shapes)   # before anything is written or measured
    out.mkdir(parents=True, exist_ok=True)
    previous = _previous(out, log)
    kept = [r for r in previous if r["shape"] not in shapes]   # other shapes measured into this folder
    old = {r["shape"]: r for r in previous if r["shape"] in shapes and not r.get("partial")}
    if not (out / RESULTS).exists():   # marks the folder as a bench's from the start (a run cut off while it writes
        write_atomic(out / RESULTS, "[]\n")   # the checkpoints is one a rerun may use)
    cuda = torch.device(device).type == "cuda"
    dtype = dtype or ("bfloat16" if cuda else "float32")
    results = []

    def save(current: dict | None, measuring: str | None):
        """results.json and results.md: other shapes' results, this run's finished shapes, the previous results of
        the shapes it has not finished, and ``current`` as far as it got (marked partial); until the run is over
        (``measuring``: the shape whose turn it is), the report's first line says it is not."""
        finished = {r["shape"] for r in results}
        rows = [*kept, *results, *(old[s] for s in shapes if s in old and s not in finished)]
        if current is not None:
            current["compile"] = compile_summary()   # so a run cut off says what compiling cost
            rows.append({**current, "partial": True})
        write_atomic(out / RESULTS, json.dumps(rows, indent=1, default=str))
        head = "" if measuring is None else f"{PARTIAL} {measuring}; this run is still going, or was cut off)\n\n"
        write_atomic(out / "results.md", head + markdown(rows))

    for i, name in enumerate(shapes):
        small = name == "tiny" and not cuda
        chosen = set(gemv.CHOICES)
        if name not in old:   # a plot without the results it shows (they are gone, or were never saved)
            (out / f"{name}.png").unlink(missing_ok=True)
        r = measure(name, checkpoints, device=device, dtype=dtype, batches=batches,
                    prompt_len=prompt_len or (32 if small else 128), new_tokens=new_tokens or (24 if small else 128),
                    repeats=repeats, hf=hf, graphs=graphs, log=log,
                    save=functools.partial(save, measuring=name))
        r["compile"], r["products"] = compile_summary(), gemv.describe(chosen)
        log(f"  {name}: torch.compile so far: {r['compile']['graphs']} graphs, {r['compile']['seconds']} s compiling")
        results.append(r)
        done = functools.partial(save, None, None if i == len(shapes) - 1 else shapes[i + 1])   # the next shape's turn
        r["plot"] = None   # the results are saved before the plot is drawn: a plot that fails loses no number
        done()
        (out / f"{name}.png").unlink(missing_ok=True)   # the previous results' plot went with them
        if (png := plot(r, out / f"{name}.png")) is not None:   # None without matplotlib (the extra 'bench')
            r["plot"] = str(png)
            done()
    return results
