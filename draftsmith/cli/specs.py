"""``draftsmith validate``, ``list`` and ``inspect``: specs and checkpoint layouts."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from draftsmith.cli.app import app, debug, given_path, out
from draftsmith.hooks.records import ConfigFirst
from draftsmith.paths import checkpoint_folder


@app.command()
def validate(files: List[str] = typer.Argument(..., metavar="SPEC", help="spec YAML files, or spec names")) -> None:
    # str, not Path: typer's Path drops a leading ./, which tells a file named as a registered spec from the name
    """Check spec files; exits non-zero listing every problem of every file."""
    from draftsmith.cli.app import OutputFailed, debug_traceback, report, stop_if_interrupted
    from draftsmith.errors import DraftsmithError

    bad = 0
    for f in files:  # plain text throughout: never re-wrapped or read as markup
        try:
            bad += not _validate_one(f)
        except (OutputFailed, BrokenPipeError):   # the output, not the file: the command ends (exit 74, 141)
            raise
        except DraftsmithError as e:
            stop_if_interrupted()
            bad += 1
            debug_traceback(e)
            typer.echo(f"error: {e}", err=True)
        except Exception as e:  # a bug, or a path the machine refuses: one line, and the next file is still checked
            if debug():
                raise
            stop_if_interrupted()
            bad += 1
            typer.echo(f"{f}:", err=True)   # report's line follows: "internal error: ..." or "error: PATH: ..."
            report(e)
    raise typer.Exit(1 if bad else 0)


def _validate_one(f: str) -> bool:
    """Check one spec file (its checkpoints too, where both folders are there), saying what it finds; whether it
    is fine. A spec that does not load raises."""
    from draftsmith import hub, load_spec
    from draftsmith.assembler.folders import checkpoint_ref
    from draftsmith.errors import short
    from draftsmith.specs.resolve import unreached_steps

    spec = load_spec(f)
    dec = spec.decoding
    if said := unreached_steps(dec.topk, dec.steps, dec.draft_tokens, dec.mode, dec.page_size):
        typer.echo(f"{f}: warning: {said}", err=True)   # as assemble() warns at a load
    folders = {}
    for which in ("target", "draft"):
        ref = checkpoint_ref(spec, which)  # as assemble() resolves it: against the spec's own file
        if ref is None:
            continue
        if hub.cache_name(ref) is not None:  # cache:NAME is fetched on first use, never here
            if (folder := hub.fetched(ref)) is not None:
                folders[which] = folder
            continue
        path = Path(ref)
        if path.is_dir():
            folders[which] = path
        else:
            typer.echo(f"{f}: warning: checkpoints.{which} {short(str(path))} is not a folder (it must exist "
                       "when the spec is assembled without an explicit folder)", err=True)   # quoted: user text
    _machine_warning(f, spec)
    if len(folders) == 2:   # both there: the checks assemble() makes before it reads a tensor
        return _checkpoints_fit(f, spec, folders)
    typer.echo(f"{f}: ok ({spec.name}{provided(f)})")
    return True


def _machine_warning(f: str, spec) -> None:
    """A warning of the spec's settings a load on this machine refuses (decoding.graphs: on without CUDA; the spec
    stays valid: it may be meant for another machine). A spec that asks for nothing a machine may refuse is not
    asked about: no torch import (~1.5 s of a valid spec's validate)."""
    if not _refusable(spec):
        return
    import torch

    from draftsmith.assembler.assemble import MachineSettings, machine_problems
    from draftsmith.registry import default_registry

    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        problems = machine_problems(spec, default_registry(), device)
    except Exception:  # noqa: BLE001 (a plugin's backend that fails to build: the load says it, the spec is valid)
        return
    if problems:
        said = str(spec.error(problems, MachineSettings)).split("\n", 1)[1]
        typer.echo(f"{f}: warning: a load on this machine ({device}) refuses it as written:\n{said}", err=True)


def _refusable(spec) -> bool:
    """Whether a load on some machine may refuse the spec's settings, told without torch: graphs that need CUDA, an
    attention backend not known to build anywhere (flash: flash-attn; a plugin's)."""
    from draftsmith.components.catalog import builds_anywhere
    from draftsmith.registry import default_registry
    from draftsmith.specs.schema import CUDA_ONLY_GRAPHS

    if spec.decoding.graphs in CUDA_ONLY_GRAPHS:
        return True
    try:
        return not builds_anywhere(default_registry().get("attn_backend", spec.decoding.attention).factory)
    except Exception:  # noqa: BLE001 (machine_problems says, or passes over, what the registry raises, as before)
        return True


def _checkpoints_fit(f: str, spec, folders: dict) -> bool:
    from draftsmith.assembler.assemble import plan_assembly
    from draftsmith.cli.app import report, stop_if_interrupted
    from draftsmith.components.backends import eager
    from draftsmith.errors import DraftsmithError
    from draftsmith.registry.results import ComponentFailed

    try:
        plan_assembly(spec, folders["target"], folders["draft"], backend=eager)   # the machine's backends aside
    except Exception as e:   # a DraftsmithError prints as a message, anything else as an internal error
        if debug() and not isinstance(e, DraftsmithError):
            raise
        stop_if_interrupted()   # the checkpoints are not said not to fit for an import a Ctrl-C broke
        if _unbindable(e):   # a spec problem the draft's config shows: the spec is not valid, whatever its text
            typer.echo(f"{f}: the spec ({spec.name}) has problems its checkpoints show (weight rules or ignore "
                       "patterns that cannot be bound to the draft's config):", err=True)
        elif isinstance(e, ComponentFailed):   # a component (a plugin's) failed: not the checkpoints' fault
            typer.echo(f"{f}: the spec ({spec.name}) is valid, but building its draft for these checkpoints "
                       "failed:", err=True)
        else:
            typer.echo(f"{f}: the spec ({spec.name}) is valid, but its checkpoints do not fit:", err=True)
        report(e)
        return False
    shown = {k: os.path.normpath(v) for k, v in folders.items()}
    typer.echo(f"{f}: ok ({spec.name}{provided(f)}); checkpoints fit (target {shown['target']}, draft "
               f"{shown['draft']}; only the small tensors its checks need were read)")
    return True


def without_broken_plugins(most: int = 16):
    """(the process-wide registry, or where an installed plugin does not load (its error names it), one built
    without it; the errors of the plugins left out): one broken plugin does not hide the others from `list`."""
    from draftsmith import build_registry, default_registry
    from draftsmith.cli.app import debug_traceback
    from draftsmith.registry import PluginError

    skipped, unloaded = [], []
    while True:
        try:
            reg = build_registry(skip=skipped) if skipped else default_registry()
            reg.components   # noqa: B018 (the default registry collects them on first use: a failing hook is said here)
            return reg, unloaded
        except PluginError as e:
            if getattr(e, "plugin", None) is None or len(skipped) >= most:
                raise
            debug_traceback(e)
            unloaded.append(str(e))
            skipped.append(e.plugin)


def provided(f) -> str:
    """", from plugin 'p'" (or a DRAFTSMITH_SPEC_PATH folder) where ``f`` names a registered spec that draftsmith does
    not ship, as `list` attributes it; '' for a built-in spec or a file."""
    from draftsmith.registry import default_registry
    from draftsmith.registry.loading import BUILTIN

    reg, name = default_registry(), str(f)
    if Path(name).is_file() or name not in reg.specs or reg.specs[name].plugin == BUILTIN:
        return ""
    return f", from {reg.spec_provider(name)}"


def _unbindable(e: Exception) -> bool:
    """Whether ``e`` is the error of weight rules / ignore patterns bound to the draft's config (bind_all's): a
    ``${key}`` the config lacks, or a pattern its value makes invalid."""
    from draftsmith.components.rule_config import UnboundRules

    return isinstance(e, UnboundRules)


@app.command("list")
def list_cmd(params: bool = typer.Option(False, "--params", help="also each component's params (defaults)")) -> None:
    """Specs and components, each with the plugin that provides it (a spec of a DRAFTSMITH_SPEC_PATH folder: that
    folder). A spec that does not load is listed as broken; its errors follow the tables (exit 1). So does a
    *.yaml / *.yml file of such a folder skipped for want of a readable top-level `name:` (exit 1 too). An installed
    plugin that does not load is left out, and said after the tables with how to go on without it (exit 1)."""
    from draftsmith import load_spec
    from draftsmith.cli.app import debug_traceback
    from draftsmith.errors import DraftsmithError

    reg, broken = without_broken_plugins()
    table = Table(title="specs")
    # a spec of a DRAFTSMITH_SPEC_PATH folder is listed with its folder, shown whole (folded, never cut)
    table.add_column("name"), table.add_column("plugin", overflow="fold", max_width=40), table.add_column("description")
    for name, plugin in reg.spec_names():
        try:
            description = load_spec(name, reg).summary
        except DraftsmithError as e:
            debug_traceback(e)
            broken.append(str(e))
            lines = str(e).splitlines()
            description = f"BROKEN: {lines[len(lines) > 1].strip()} (the errors follow the tables)"
        table.add_row(escape(name), escape(plugin), escape(description))  # never markup
    out.print(table)
    table = Table(title="components")
    for col in ("kind", "name", "plugin", *["params (default)"] * params, "what"):
        table.add_column(col)
    for kind in reg.kinds():
        for name, plugin in reg.names(kind):
            comp = reg.get(kind, name)
            cells = (kind, name, plugin, *[param_summary(comp.params)] * params, comp.doc)
            table.add_row(*map(escape, cells))
    out.print(table)
    for text in broken:
        typer.echo(f"error: {text}", err=True)
    for path, why in reg.skipped_spec_files:   # not a spec: not in the table, but never unsaid
        typer.echo(f"error: skipped {path}: {why}", err=True)
    raise typer.Exit(1 if broken or reg.skipped_spec_files else 0)


def param_summary(model) -> str:
    """'name (default)' for each field of a params model; a required field shows no default, and a field that
    reads the checkpoint config when left out (:class:`~draftsmith.hooks.records.ConfigFirst`) says so."""
    def one(name, f):
        if f.is_required():
            return name
        first = "draft config, else " if any(isinstance(m, ConfigFirst) for m in f.metadata) else ""
        return f"{name} ({first}{f.get_default(call_default_factory=True)!r})"
    return ", ".join(one(n, f) for n, f in model.model_fields.items()) or "-"


@app.command()
def inspect(ckpt: Path = typer.Argument(..., metavar="CKPT_DIR", help="draft checkpoint folder", parser=given_path),
            extends: bool = typer.Option(False, "--extends", help="print the spec as its changes to the family's "
                                                                 "(extends: FAMILY), not whole"),
            spec: Optional[str] = typer.Option(None, "--spec", help="read CKPT with this spec (a name or a YAML "
                                                                    "path) instead of detecting its layout")) -> None:
    """Detect a draft checkpoint's layout and print a YAML spec that loads it."""
    checkpoint_folder(ckpt)   # before the slow imports: a mistyped path is said at once
    import yaml

    from draftsmith.convert.inspect import inspect_checkpoint, render_unknown

    found = inspect_checkpoint(ckpt, spec=spec)
    if found.match is None:
        typer.echo(f"error: {render_unknown(found)}", err=True)
        raise typer.Exit(1)
    from draftsmith.errors import short_text

    where = short_text(ckpt, 300)   # on one line: a newline in a folder's name must not end the YAML comment
    by = f" (detected by plugin {found.match.by_plugin!r})" if found.match.by_plugin else ""
    from draftsmith.convert.fits import proposed_fit

    judged = proposed_fit(found)
    misfit = _misfit(judged)
    if misfit:   # the first comment: `head -1` of the spec shows why it does not load the folder
        sys.stdout.write(f"# {misfit}\n")
    sys.stdout.write(f"# {where}: {found.match.reason}{by}\n")
    said = [] if judged is None or misfit else judged.contradictions   # a misfit says them first
    for note in [*found.match.assumptions, *said]:
        sys.stdout.write(f"# assumed/noticed: {note}\n")
    if found.unread:
        sys.stdout.write(f"# config keys draftsmith's built-in components do not read: {', '.join(found.unread)}\n")
    data = _as_changes(found) if extends else found.spec
    sys.stdout.write(yaml.safe_dump(data, sort_keys=False))
    if misfit:   # the family is right and the folder is not: the spec is printed, and the exit says it fails
        typer.echo(f"error: {where}: {misfit}", err=True)   # short_text: no escape sequence reaches the terminal
        raise typer.Exit(1)
    if said:   # it loads, and a load says these too (assemble's warning)
        typer.echo(f"warning: {where}: {'; '.join(said)}", err=True)


def _as_changes(found) -> dict:
    """The proposed spec as its changes to its family's (``extends: FAMILY``): name and description first."""
    from draftsmith.registry import default_registry
    from draftsmith.specs.extends import OWN, changes, merged
    from draftsmith.specs.loader import load_spec

    family, whole = (({k: v for k, v in d.items() if k not in OWN}) for d in
                     (load_spec(found.match.spec, default_registry()).model_dump(mode="json"), found.spec))
    if merged(family, rest := changes(family, whole)) != whole:   # it drops a param the family's component has
        sys.stdout.write(f"# --extends: no changes to {found.match.spec} give this spec (it leaves out a value the "
                         "family states, which extends would keep): printed whole\n")
        return found.spec
    return {k: found.spec[k] for k in OWN if k in found.spec} | {"extends": found.match.spec} | rest


def _misfit(judged) -> str:
    """What keeps the spec inspect proposes from loading the folder as it is (``judged``: convert.fits.proposed_fit,
    the model it builds with a stand-in target, as convert judges: missing, unexpected and colliding names, dtypes
    assemble() refuses), a vocabulary size its config states that its tensors contradict first, or ''."""
    from draftsmith.errors import short_list

    if judged is None or not (judged.misfits or judged.refused):
        return ""
    read_as = {c: " (would be read from " + " or ".join(map(repr, names)) + ")" for c, names in judged.read_as.items()}
    lines = judged.contradictions + [f"{name!r} {why}{read_as.get(name, '')}"
                                     for name, why in sorted(judged.misfits.items())] + judged.refused
    return f"the proposed spec does not load this folder as it is: {short_list(lines, 6, 600, quote=False)}"


@app.command()
def convert(ckpt: Path = typer.Argument(..., metavar="CKPT_DIR", help="draft checkpoint folder", parser=given_path),
            to: str = typer.Option(..., "--to", help="layout to write: midlayer, layers, speculators, mistral, "
                                                     "eagle1-speculators"),
            out_dir: Path = typer.Argument(..., metavar="OUT", help="folder to write (created)", parser=given_path),
            spec: Optional[str] = typer.Option(None, "--spec", help="read CKPT with this spec (a name or a YAML "
                                                                    "path) instead of detecting its layout")) -> None:
    """Rewrite a draft checkpoint into another layout (config included, safetensors out)."""
    checkpoint_folder(ckpt)   # before the slow imports: a mistyped path is said at once
    import json

    from draftsmith.convert.inspect import inspect_checkpoint
    from draftsmith.convert.run import convert as run_convert
    from draftsmith.convert.layouts import layouts
    from draftsmith.convert.run import loading_line
    from draftsmith.errors import short_text

    # a ConvertError prints as draftsmith's errors do (exit 1); an unknown --to is an OptionError (exit 2)
    config = run_convert(ckpt, to, out_dir, spec)
    layout = layouts()[to]
    # what loads it is what detection proposes for what was written (as generate --draft and inspect take it): its
    # family's spec by name only where that spec alone reads it the same (not an FP8 or a narrow draft's)
    # (and never one that builds another draft than the source was read as: a plugin family's)
    line = loading_line(out_dir, source=inspect_checkpoint(ckpt, spec=spec))
    src, dst = (short_text(p, 300) for p in (ckpt, out_dir))   # one comment line, no escape sequence in it
    sys.stdout.write(f"# {src} -> {dst} ({to}: {layout.description}); {line}\n")
    sys.stdout.write(json.dumps(config, indent=2) + "\n")
