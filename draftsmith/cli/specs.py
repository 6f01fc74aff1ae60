"""``draftsmith validate``, ``list`` and ``inspect``: specs and checkpoint layouts."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List

import typer
from rich.markup import escape
from rich.table import Table

from draftsmith.cli.app import app, out


@app.command()
def validate(files: List[Path] = typer.Argument(..., help="spec YAML files")) -> None:
    """Check spec files; exits non-zero listing every problem of every file."""
    from draftsmith import hub, load_spec
    from draftsmith.assembler.assemble import spec_relative
    from draftsmith.cli.app import report
    from draftsmith.errors import DraftsmithError

    bad = 0
    for f in files:  # plain text throughout: never re-wrapped or read as markup
        try:
            spec = load_spec(f)
        except DraftsmithError as e:
            bad += 1
            typer.echo(str(e), err=True)
            continue
        except Exception as e:  # a bug: one line, and the next file is still checked
            bad += 1
            typer.echo(f"{f}:", err=True)
            report(e)
            continue
        typer.echo(f"{f}: ok ({spec.name})")
        for which in ("target", "draft"):
            ref = getattr(spec.checkpoints, which)
            if ref is None or hub.cache_name(ref) is not None:  # cache:NAME is fetched on first use
                continue
            path = spec_relative(spec, ref)  # as assemble() resolves it: against the spec's own file
            if not path.is_dir():
                typer.echo(f"{f}: warning: checkpoints.{which} {path} is not a folder (it must exist when the "
                           "spec is assembled without an explicit folder)", err=True)
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
        table.add_row(escape(name), escape(plugin), escape(load_spec(name).description))  # never markup
    out.print(table)
    table = Table(title="components")
    for col in ("kind", "name", "plugin", "what"):
        table.add_column(col)
    for kind in reg.kinds():
        for name, plugin in reg.names(kind):
            table.add_row(escape(kind), escape(name), escape(plugin), escape(reg.get(kind, name).doc))
    out.print(table)


@app.command()
def inspect(ckpt: Path = typer.Argument(..., help="draft checkpoint folder")) -> None:
    """Detect a draft checkpoint's layout and print a YAML spec that loads it."""
    import yaml

    from draftsmith.convert.inspect import inspect_checkpoint, render_unknown

    found = inspect_checkpoint(ckpt)
    if found.match is None:
        typer.echo(render_unknown(found), err=True)
        raise typer.Exit(1)
    where = " ".join(str(ckpt).splitlines())  # a folder name with a newline must not end the YAML comment
    sys.stdout.write(f"# {where}: {found.match.reason}\n")
    for note in found.match.assumptions:
        sys.stdout.write(f"# assumed/noticed: {note}\n")
    if found.unread:
        sys.stdout.write(f"# config keys draftsmith does not read: {', '.join(found.unread)}\n")
    data = found.spec
    sys.stdout.write(yaml.safe_dump(data, sort_keys=False))


@app.command()
def convert(ckpt: Path = typer.Argument(..., help="draft checkpoint folder"),
            to: str = typer.Option(..., "--to", help="layout to write: midlayer, layers, speculators, mistral"),
            out_dir: Path = typer.Argument(..., help="folder to write (created)")) -> None:
    """Rewrite a draft checkpoint into another layout (config included, safetensors out)."""
    import json

    from draftsmith.convert.inspect import inspect_checkpoint
    from draftsmith.convert.run import convert as run_convert, layouts

    config = run_convert(ckpt, to, out_dir)   # a ConvertError prints as draftsmith's errors do (exit 1)
    layout = layouts()[to]
    # the spec is the one that detection finds in what was written (the layout's own is its EAGLE-3 default)
    found = inspect_checkpoint(out_dir).match
    spec = found.spec if found else f"{layout.spec} (detection found none: `draftsmith inspect {out_dir}`)"
    sys.stdout.write(f"# {ckpt} -> {out_dir} ({to}: {layout.description}); load it with spec {spec}\n")
    sys.stdout.write(json.dumps(config, indent=2) + "\n")
