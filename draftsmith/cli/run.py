"""``draftsmith generate`` and ``draftsmith bench``."""
from __future__ import annotations

import contextlib
import functools
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from draftsmith.cli.app import (SETTING_OPTIONS, app, detect_spec, err, given_path, given_paths, out,
                                setting_problems, target_folder_problems, threads_text, typed)
from draftsmith.cli.bench_options import batch_sizes, check_graphs, scale_only, shape_names

# the options generate and bench share, written once (typer reads an Option's settings, never changes them)
TARGET = typer.Option(None, help="Hugging Face target folder, or 'smollm2' (the cached target)")
DRAFT = typer.Option(None, help="draft checkpoint folder", parser=given_path)
TOKEN_IDS = typer.Option(None, "--token-ids", help="the prompt as token ids, e.g. 1,2,3 (instead of --prompt; for a "
                         "target folder without a tokenizer)")


THREADS = typer.Option("auto", callback=threads_text, help="CPU threads for torch: a count, or auto (the fastest of "
                       "1, 2, 4, 8, timed on short runs of this call; 1 on CUDA and with bench --scale)")


def _temperature(value: float) -> float:
    """--temperature below 0, refused as typer's range check refuses it; not that check itself, which says NaN is
    below 0: NaN, inf and the float32 bounds are generate()'s (_check_options), which says what each is."""
    if value < 0:
        raise typer.BadParameter(f"{value} is below 0; a finite number >= 0 is expected (0 = greedy)")
    return value


@app.command()
def generate(
    ctx: typer.Context,
    spec: Optional[str] = typer.Option(None, help="built-in spec name or YAML path ('demo': the embedded toy pair); "
                                       "default: detected from --draft, else smollm2"),
    target: Optional[str] = TARGET,
    draft: Optional[Path] = DRAFT,
    prompt: str = typer.Option("def fibonacci(n):", help="prompt text (needs a tokenizer in the target folder)"),
    token_ids: Optional[str] = TOKEN_IDS,
    chat: bool = typer.Option(False, help="send --prompt as one user message through the target tokenizer's chat "
                              "template (the assistant's turn opened), as an instruct model expects"),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", min=1, help="tokens to generate per prompt"),
    temperature: float = typer.Option(0.0, callback=_temperature, help="0 = greedy"),
    seed: Optional[int] = typer.Option(None, help="seed for sampling"),
    topk: Optional[int] = typer.Option(None, help="tree branching (1 = chain); default from the spec"),
    steps: Optional[int] = typer.Option(None, help="draft depth; default from the spec"),
    draft_tokens: Optional[int] = typer.Option(None, "--draft-tokens",
                                               help="tree size incl. the root; default from the spec"),
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N"),
    dtype: str = typer.Option("float32", help="float32, bfloat16, float16 or float64"),
    compare: bool = typer.Option(True, help="also run target-only and a chain, and show all side by side"),
    threads: str = THREADS,
) -> None:
    """Generate with speculative decoding; with no options, runs the SmolLM2 pair (fetched once) on the CPU."""
    given_paths(spec, target, draft)
    threads = _check_options(device, dtype, threads, max_new_tokens, temperature, seed)   # before torch's import
    import torch

    import draftsmith

    prompt = prompt if token_ids is None else _ids(token_ids, ctx, chat)
    if chat:
        prompt = [{"role": "user", "content": prompt}]   # generate() renders it (draftsmith.chat)
    torch.set_num_threads(threads or 1)   # auto: measured once the model is loaded
    spec, target = _pair(spec, target, draft, default="smollm2")
    plan = dict(topk=topk, steps=steps, draft_tokens=draft_tokens)
    spec = draftsmith.load_spec(spec)
    names = _call_names(token_ids)
    _plan_options(spec, plan)   # before the load; the draft's vocabulary (topk's bound) and target after it
    _target_options(spec, target, prompt, max_new_tokens, names)
    # no warning of the spec's plan: the plan line below says the plan this call runs
    model = _assemble_with_plan(spec, plan, target=target, draft=draft, device=device, dtype=dtype,
                                warn_fallback=False)
    _plan_options(spec, plan, model)
    if chat:
        from draftsmith.chat import template_problem
        from draftsmith.errors import OptionError

        if (why := template_problem(model.tokenizer)) is not None:   # a template the files' check did not see
            raise OptionError(_chat_said(why))
    _call_options(model, prompt, dict(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, **plan),
                  names)
    out.print(f"[bold]spec[/bold] {model.spec.name}: {escape(model.spec.summary)}")
    chosen = model.plan(**plan)
    out.print(f"[bold]plan[/bold] {chosen.mode}, topk {chosen.topk}, steps {chosen.steps}, "
              f"{chosen.draft_tokens} draft tokens: {escape(chosen.reason)}")
    kw = dict(temperature=temperature, seed=seed)
    with _as_options():   # what a run refuses (KV pools past the free memory) is the options', as bench says it
        runs = {"speculative": lambda n: model.generate(prompt, max_new_tokens=n, **plan, **kw)}
        if threads is None:
            from draftsmith.threads import auto_threads

            choice = auto_threads(lambda: runs["speculative"](min(8, max_new_tokens)), device)
            out.print(f"[bold]threads[/bold] {choice.said('the speculative run')}")
        if compare:
            if model.plan(**plan).topk > 1:
                runs["chain v1 (topk=1)"] = lambda n: model.generate(prompt, max_new_tokens=n, topk=1, steps=steps,
                                                                     **kw)
            runs["target only"] = lambda n: model.generate_baseline(prompt, max_new_tokens=n, **kw)
            for call in runs.values():
                call(min(8, max_new_tokens))  # untimed warm-up: first-use costs (allocations, kernel setup) stay out
        rows = [(name, call(max_new_tokens)) for name, call in runs.items()]
    res = rows[0][1]
    rows[0] = (f"speculative {res.stats.mode}", res)
    shown = res.text if res.text is not None else repr(res.token_ids)
    # user text, as it is: soft_wrap keeps rich from breaking a line past the console's width with newlines of its own
    out.print(f"[bold]prompt[/bold] {escape(repr(prompt))}\n[bold]output[/bold] {escape(shown)}", soft_wrap=True)
    _stats_table(rows, greedy=temperature == 0)
    _step_costs(rows, timed=torch.device(device).type == "cpu")   # CUDA's forward timers see launches


PLAN_OPTIONS = {"topk": "--topk", "steps": "--steps", "draft_tokens": "--draft-tokens"}


def _assemble_with_plan(spec, plan: dict, **load):
    """assemble() with --topk as the spec's (the spec's own topk past the draft's vocabulary is no reason to refuse
    a --topk within it; --steps and --draft-tokens are per-call values the load does not check, and as the spec's
    they would be warned about as the spec's); what the load refuses in --topk's value is said as that option's
    problem (an OptionError, exit 2), as the checks after the load say it."""
    import draftsmith
    from draftsmith.errors import OptionError, SpecError

    topk = {"topk": plan["topk"]} if plan.get("topk") is not None else {}
    given = {f"decoding.{k}": PLAN_OPTIONS[k] for k in topk}
    try:
        return draftsmith.assemble(spec.with_decoding(**topk), **load)
    except SpecError as e:
        if e.problems and all(p.path in given for p in e.problems):
            raise OptionError("\n  ".join(f"{given[p.path]}: {p.message}" for p in e.problems)) from None
        raise


def _plan_options(spec, plan: dict, model=None) -> None:
    """--topk, --steps and --draft-tokens checked as generate() checks them, an OptionError (exit 2) naming the
    options: against the spec alone before the model loads, against the model (its draft vocabulary, its target)
    after."""
    from draftsmith.decoding.arguments import check_overrides, overridden
    from draftsmith.errors import ArgumentError, OptionError

    problems: list[str] = []
    if model is None:
        overridden(spec.decoding, plan, problems, draft_vocab=sys.maxsize, names=PLAN_OPTIONS)
    else:
        try:
            check_overrides(model, **plan, what="draftsmith generate", names=PLAN_OPTIONS)
        except ArgumentError as e:
            problems = e.problems
    if problems:
        raise OptionError("\n  ".join(problems))


def _call_names(token_ids: Optional[str]) -> dict[str, str]:
    """generate()'s arguments under the options that give them: the prompt as --token-ids or --prompt."""
    return {**SETTING_OPTIONS, **PLAN_OPTIONS, "prompt": "--prompt" if token_ids is None else "--token-ids"}


def _target_folder(spec, target: Optional[Path]) -> Optional[Path]:
    """The target folder the load will read, where it is known without fetching anything: --target, else the
    spec's checkpoints.target (a cached target only once it is in the cache)."""
    from draftsmith import hub
    from draftsmith.assembler.folders import checkpoint_ref

    if target is not None:
        return target
    ref = checkpoint_ref(spec, "target")
    return ref if ref is None else hub.fetched(ref) if hub.cache_name(ref) is not None else Path(ref)


def _target_options(spec, target: Optional[Path], prompt, max_new_tokens: int, names: dict[str, str]) -> None:
    """The prompt and --max-new-tokens checked against the target folder's config and tokenizer files before the
    models load (:func:`draftsmith.cli.app.target_folder_problems`): an OptionError (exit 2) naming the options."""
    from draftsmith.chat import has_chat_template, is_conversation, template_problem
    from draftsmith.errors import CheckpointError, OptionError

    folder = _target_folder(spec, target)
    problems = [] if folder is None else target_folder_problems(folder, prompt, max_new_tokens, names)
    if folder is not None and not problems and is_conversation(prompt):
        try:   # before the models load
            if not has_chat_template(folder):
                problems.append(_chat_said(template_problem(None, folder, template=False)))
        except CheckpointError as e:   # a malformed chat_template.json, read as the tokenizer has no template
            problems.append(f"--chat: {e}")
    if problems:
        error = OptionError("\n  ".join(problems))
        from draftsmith.assembler.explain import folder_swap_note

        if (note := folder_swap_note(folder, "target")) is not None:   # a draft's folder has no tokenizer either
            error.add_note(note)
        raise error


def _chat_said(why: str) -> str:
    """chat.template_problem's reason as --chat's."""
    return f"--chat: {why.replace('pass text or token ids instead', 'drop --chat')}"


def _call_options(model, prompt, arguments: dict, names: dict[str, str]) -> None:
    """The call's arguments checked as generate() checks them, once the model is loaded (what only it tells: the
    tokens a text prompt makes, a rotary embedding's bound): an OptionError (exit 2) naming the options, not
    generate()'s error naming its arguments."""
    from draftsmith.decoding.arguments import check_call

    with _as_options():
        check_call(model, prompt, **arguments, what="draftsmith generate", names=names)


@contextlib.contextmanager
def _as_options():
    """generate()'s ArgumentError, whose problems name the options (``names``), as an OptionError: exit 2."""
    from draftsmith.errors import ArgumentError, OptionError

    try:
        yield
    except ArgumentError as e:
        raise OptionError("\n  ".join(e.problems)) from None


def _ids(text: str, ctx: typer.Context, chat: bool = False) -> list[int]:
    """--token-ids, which --prompt and --chat rule out (:func:`draftsmith.options.parse_token_ids`)."""
    from draftsmith.errors import OptionError
    from draftsmith.options import parse_token_ids

    if typed(ctx, "prompt"):
        raise OptionError("--prompt and --token-ids both give the prompt: give one")
    if chat:
        raise OptionError("--chat renders text through the chat template; --token-ids are ids already: give "
                          "--prompt with --chat, or drop --chat")
    return parse_token_ids(text)


def _target(target: Optional[str]) -> Optional[Path]:
    """--target: a folder, or a cached target's name (``smollm2``, ``cache:smollm2``) as train and doctor take it. A
    str, not a typer Path, which drops a leading ./ (``./smollm2`` is a folder, ``smollm2`` the cached target)."""
    from draftsmith import hub

    return None if target is None else hub.target_folder(target, console=err)


def _pair(spec: Optional[str], target: Optional[str], draft: Optional[Path], default: str):
    """(spec, target folder) of generate and bench: --target as :func:`_target` takes it; the spec --spec names,
    else the one inspect proposes for --draft (printed with the detector's reason), else ``default``."""
    target = _target(target)
    # an empty --spec is load_spec's to refuse, not a missing one
    return spec if spec is not None else detect_spec(draft, target) if draft is not None else default, target


def _check_options(device: str, dtype: str, threads: str, max_new_tokens: int, temperature: float = 0.0,
                   seed: Optional[int] = None, more: tuple = ()) -> Optional[int]:
    """--device, --dtype, --threads, the settings generate() checks (--max-new-tokens, --temperature, --seed) and
    the checks in ``more`` (callables raising OptionError) refused before anything is loaded (torch is imported only
    for a device other than the cpu), every problem in one OptionError (exit 2); the thread count (None: auto)."""
    from draftsmith.errors import OptionError
    from draftsmith.options import check_device, collect, float_name, parse_threads

    problems: list[str] = []

    said = functools.partial(collect, problems)   # check(*args), its problem kept
    said(check_device, device)
    said(float_name, dtype)
    threads = said(parse_threads, threads)
    problems += setting_problems(max_new_tokens, temperature, seed)
    if seed is not None and temperature == 0:   # an option that would be ignored is refused, as bench's are
        problems.append(f"--seed {seed}: greedy decoding (--temperature 0) draws nothing, so the seed would be "
                        "ignored; give --temperature > 0 to sample, or leave --seed out")
    for check in more:
        said(check)
    if problems:
        raise OptionError("\n  ".join(problems))
    return threads


def _stats_table(rows, greedy: bool) -> None:
    table = Table(title="statistics (tau = tokens per target verification forward)")
    for col in ("run", "tau", "target fwd", "draft fwd", "accepted per position", "tok/s", "vs target-only",
                "same as target-only"):
        table.add_column(col)
    ref = rows[-1][1] if rows[-1][0] == "target only" else None
    for name, r in rows:
        s = r.stats
        same = "-" if ref is None or not greedy else str(r.token_ids == ref.token_ids)
        speed = "-" if ref is None else f"{s.tokens_per_second / ref.stats.tokens_per_second:.2f}x"
        table.add_row(name, f"{s.acceptance_length:.2f}", str(s.target_forwards), str(s.draft_forwards),
                      str(s.accepted_per_position), f"{s.tokens_per_second:.1f}", speed, same)
    out.print(table)


def _step_costs(rows, timed: bool) -> None:
    """Under the table: each speculative row's step in target-only decode steps, split into its parts, and the tau
    at which it breaks even (:func:`draftsmith.decoding.stats.step_cost`), measured by this call's runs."""
    from draftsmith.decoding.stats import step_cost

    if rows[-1][0] != "target only":
        return
    for name, r in rows[:-1]:
        if (cost := step_cost(r.stats, rows[-1][1].stats, timed)) is not None:
            out.print(f"[bold]{escape(name)}[/bold]: {cost.said(r.stats.acceptance_length)}")


@app.command()
def bench(
    ctx: typer.Context,
    spec: Optional[str] = typer.Option(None, help="built-in spec name or YAML path; default: detected from --draft "
                                       "(as generate does), else demo"),
    target: Optional[str] = TARGET,
    draft: Optional[Path] = DRAFT,
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", min=1, help="tokens to generate per prompt"),
    repeats: int = typer.Option(3, min=1, help="runs per method; the median is reported"),
    prompt: str = typer.Option("def fibonacci(n):", help="prompt text (needs a tokenizer in the target folder)"),
    token_ids: Optional[str] = TOKEN_IDS,
    threads: str = THREADS,
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N"),
    dtype: Optional[str] = typer.Option(None, help="float32 (the default), bfloat16, float16 or float64; with "
                                                   "--scale on CUDA the default is bfloat16"),
    scale: Optional[str] = typer.Option(None, help="random weights in Llama-3.x shapes instead: tiny, 1b, 8b "
                                                  "(comma-separated); see draftsmith/scale/"),
    out_dir: Path = typer.Option(Path("bench-scale"), "--out", parser=given_path,
                                 help="--scale: checkpoints, results.md/json, PNGs (a new or empty folder, or a "
                                      "previous run's)"),
    batches: str = typer.Option("1,8", help="--scale: batch sizes"),
    checkpoints: Optional[Path] = typer.Option(None, parser=given_path,
                                               help="--scale: where the random checkpoints go (default: "
                                                    "OUT/checkpoints; written once, reused)"),
    graphs: str = typer.Option("auto", help="decoding.graphs for draftsmith: auto, on, off or compile"),
    hf: bool = typer.Option(True, "--hf/--no-hf", help="--scale: also time transformers generate (eager, static)"),
) -> None:
    """Side by side in one run: target-only, HF generate, HF assisted generation and prompt lookup, draftsmith chain
    and tree (the demo pair, or --draft with the spec detected as generate detects it), or with --scale the bandwidth
    limit, draftsmith and transformers on Llama-3.x shapes."""
    if scale is None:   # with --scale, --target and --draft are scale_only's to refuse
        given_paths(spec, target, draft)
    threads = _check_options(device, dtype or "float32", threads, max_new_tokens,   # before torch's import
                             more=(lambda: check_graphs(graphs, device), lambda: scale_only(ctx, scale)))
    import torch

    import draftsmith
    from draftsmith.bench import run_bench

    prompt = prompt if token_ids is None else _ids(token_ids, ctx)
    torch.set_num_threads(threads or 1)   # auto: the pair benchmark measures it; --scale keeps 1 (as it records)
    if scale is not None:
        from draftsmith.scale.report import markdown
        from draftsmith.scale.run import run_scale

        results = run_scale(shape_names(scale), out_dir, device=device, dtype=dtype,   # None: bf16 on CUDA
                            batches=batch_sizes(batches), repeats=repeats, graphs=graphs,
                            checkpoints=checkpoints, hf=hf,
                            log=lambda line: out.print(escape(line)))
        out.print(escape(markdown(results)), soft_wrap=True)
        pngs = [r["plot"] for r in results if r.get("plot")]
        plots = (f" and {len(pngs)} PNG(s) of tok/s against tau" if pngs else
                 "; no PNG: matplotlib is not installed (pip install 'draftsmith[bench]')")
        out.print(f"wrote {escape(str(out_dir))}/results.md, results.json{escape(plots)}", soft_wrap=True)
        return
    spec, target = _pair(spec, target, draft, default="demo")
    names = _call_names(token_ids)
    _target_options(draftsmith.load_spec(spec), target, prompt, max_new_tokens, names)
    with _as_options():   # what only the loaded model tells (a text prompt's tokens), named as the options
        run_bench(spec, target=target, draft=draft, prompt=prompt, max_new_tokens=max_new_tokens, repeats=repeats,
                  device=device, dtype=dtype or "float32", console=out, graphs=graphs, names=names,
                  threads=threads)
