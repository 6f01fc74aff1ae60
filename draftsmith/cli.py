"""The ``draftsmith`` command: generate, validate, inspect, list, bench."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Speculative-decoding draft models from YAML.")
out = Console(width=max(110, Console().width))  # tables stay readable when piped (80 columns by default)
err = Console(stderr=True)


@app.command()
def generate(
    spec: str = typer.Option("demo", help="built-in spec name or YAML path"),
    target: Optional[Path] = typer.Option(None, help="Hugging Face target folder"),
    draft: Optional[Path] = typer.Option(None, help="draft checkpoint folder"),
    prompt: str = typer.Option("def fibonacci(n):", help="prompt text (needs a tokenizer in the target folder)"),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens"),
    temperature: float = typer.Option(0.0, help="0 = greedy"),
    seed: Optional[int] = typer.Option(None, help="seed for sampling"),
    topk: Optional[int] = typer.Option(None, help="tree branching (1 = chain); default from the spec"),
    steps: Optional[int] = typer.Option(None, help="draft depth; default from the spec"),
    draft_tokens: Optional[int] = typer.Option(None, "--draft-tokens", help="tree size incl. the root"),
    device: str = typer.Option("cpu"),
    dtype: str = typer.Option("float32"),
    compare: bool = typer.Option(True, help="also run target-only and a chain, and show all side by side"),
    threads: int = typer.Option(1, help="CPU threads for torch (1 suits small models best)"),
) -> None:
    """Generate with speculative decoding; with no options, runs the embedded demo pair."""
    import torch

    import draftsmith

    torch.set_num_threads(threads)
    model = draftsmith.assemble(spec, target=target, draft=draft, device=device, dtype=dtype)
    out.print(f"[bold]spec[/bold] {model.spec.name}: {escape(model.spec.description)}")
    kw = dict(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    res = model.generate(prompt, topk=topk, steps=steps, draft_tokens=draft_tokens, **kw)
    out.print(f"[bold]prompt[/bold] {prompt!r}\n[bold]output[/bold] {res.text if res.text is not None else res.token_ids!r}")
    rows = [(f"speculative {res.stats.mode}", res)]
    if compare:
        if model.plan(topk=topk, steps=steps, draft_tokens=draft_tokens).topk > 1:
            rows.append(("chain v1 (topk=1)", model.generate(prompt, topk=1, steps=steps, **kw)))
        rows.append(("target only", model.generate_baseline(prompt, **kw)))
    _stats_table(rows, greedy=temperature == 0)


def _stats_table(rows, greedy: bool) -> None:
    table = Table(title="statistics (tau = tokens per target verification forward)")
    for col in ("run", "tau", "target fwd", "draft fwd", "accepted per position", "tok/s", "same as target-only"):
        table.add_column(col)
    ref = rows[-1][1].token_ids if rows[-1][0] == "target only" else None
    for name, r in rows:
        s = r.stats
        same = "-" if ref is None or not greedy else str(r.token_ids == ref)
        table.add_row(name, f"{s.acceptance_length:.2f}", str(s.target_forwards), str(s.draft_forwards),
                      str(s.accepted_per_position), f"{s.tokens_per_second:.1f}", same)
    out.print(table)


@app.command()
def validate(files: List[Path] = typer.Argument(..., help="spec YAML files")) -> None:
    """Check spec files; exits non-zero listing every problem of every file."""
    from draftsmith import SpecError, load_spec

    bad = 0
    for f in files:
        try:
            spec = load_spec(f)
            out.print(f"{f}: ok ({spec.name})")
        except (SpecError, FileNotFoundError, LookupError) as e:
            bad += 1
            typer.echo(str(e), err=True)  # plain text: never re-wrapped or read as markup
    raise typer.Exit(1 if bad else 0)


@app.command("list")
def list_cmd() -> None:
    """Specs and components, each with the plugin that provides it."""
    from draftsmith import default_registry

    reg = default_registry()
    table = Table(title="specs")
    table.add_column("name"), table.add_column("plugin"), table.add_column("description")
    from draftsmith import load_spec

    for name, plugin in reg.spec_names():
        table.add_row(name, plugin, escape(load_spec(name).description))
    out.print(table)
    table = Table(title="components")
    for col in ("kind", "name", "plugin", "what"):
        table.add_column(col)
    for kind in reg.kinds():
        for name, plugin in reg.names(kind):
            table.add_row(kind, name, plugin, escape(reg.get(kind, name).doc))
    out.print(table)


@app.command()
def inspect(ckpt: Path = typer.Argument(..., help="draft checkpoint folder")) -> None:
    """Detect a draft checkpoint's layout and print a YAML spec that loads it."""
    import yaml

    from draftsmith import default_registry, load_spec
    from draftsmith.assembler.checkpoint import list_tensors
    from draftsmith.assembler.config import read_config

    cfg, infos = read_config(ckpt), list_tensors(ckpt)
    match = default_registry().detect_layout(cfg, list(infos))
    if match is None:
        err.print(f"{ckpt}: no registered detector recognises this layout ({len(infos)} tensors, e.g. "
                  f"{sorted(infos)[:5]})")
        raise typer.Exit(1)
    spec = load_spec(match.spec)
    sys.stdout.write(f"# {ckpt}: {match.reason}\n")
    for note in match.assumptions:
        sys.stdout.write(f"# assumed/noticed: {note}\n")
    data = spec.model_dump(mode="json", exclude_defaults=False)
    data["name"] = f"{match.spec}-{Path(ckpt).name}".lower().replace("_", "-")
    data["checkpoints"]["draft"] = str(Path(ckpt).resolve())
    sys.stdout.write(yaml.safe_dump(data, sort_keys=False))


@app.command()
def bench(
    spec: str = typer.Option("demo", help="built-in spec name or YAML path"),
    target: Optional[Path] = typer.Option(None), draft: Optional[Path] = typer.Option(None),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens"),
    repeats: int = typer.Option(3, help="runs per method; the median is reported"),
    prompt: str = typer.Option("def fibonacci(n):"),
    threads: int = typer.Option(1, help="CPU threads for torch, the same for every method"),
    device: str = typer.Option("cpu"),
    dtype: str = typer.Option("float32"),
) -> None:
    """Side by side in one run: target-only, HF generate, HF assisted generation, draftsmith chain and tree."""
    import torch

    from draftsmith.bench import run_bench

    torch.set_num_threads(threads)

    run_bench(spec, target=target, draft=draft, prompt=prompt, max_new_tokens=max_new_tokens, repeats=repeats,
              device=device, dtype=dtype, console=out)


def main() -> None:  # pragma: no cover
    app()
