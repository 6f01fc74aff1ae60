"""``draftsmith doctor``: find the spec setting that restores a draft's acceptance."""
from __future__ import annotations

import functools
import re
from typing import NoReturn, Optional

import typer
from rich.markup import escape
from rich.table import Table

from draftsmith.cli.app import app, detect_spec, err, given_paths, out, setting_problems, threads_text


@app.command()
def doctor(
    target: Optional[str] = typer.Argument(None, help="Hugging Face target folder, or 'smollm2' (the cached demo "
                                                      "target); default: the spec's checkpoints.target"),
    draft: Optional[str] = typer.Argument(None, help="draft checkpoint folder; default: the spec's "
                                                      "checkpoints.draft"),
    spec: Optional[str] = typer.Option(None, help="built-in spec name or YAML path (default: detect the layout "
                                                  "of DRAFT)"),
    probe: Optional[str] = typer.Option(None, help="probe text, or @FILE (default: two short Python snippets)"),
    token_ids: Optional[str] = typer.Option(None, "--token-ids", help="the probe as token ids, e.g. 1,2,3 (a "
                                                                      "target without a tokenizer)"),
    max_new_tokens: int = typer.Option(32, "--max-new-tokens", help="tokens generated per probe"),
    min_tau: Optional[float] = typer.Option(None, "--min-tau", help="acceptance length below which the readings "
                                            "are tried (default: 2.0; 1.5 for a chain of 1 step)"),
    search: Optional[bool] = typer.Option(None, "--search/--no-search",
                                          help="try the readings whatever the acceptance (default: only when low)"),
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N"),
    dtype: str = typer.Option("float32", help="float32, bfloat16, float16 or float64"),
    threads: str = typer.Option("1", callback=threads_text, help="CPU threads for torch: a count, or auto (the "
                                "fastest of 1, 2, 4, 8, timed on a short chain of the spec as given)"),
) -> None:
    """Run the pair on a short probe, print acceptance per draft position and, when it is low, try the readings
    the public formats leave ambiguous (aux ids as inputs or outputs, norms, d2t, rope order and base, feedback) and
    print the spec change that restores acceptance. Exit 0 when acceptance is fine, 1 when it is low, 2 on bad
    input."""
    from draftsmith.errors import DraftsmithError

    try:   # before torch's import (an empty DRAFT, or none and no --spec, is refused below, as itself)
        if (spec is not None or draft is not None) and draft != "":
            given_paths(spec, target, draft)
    except DraftsmithError as e:
        _bad_input(e)
    threads, probe = _checked(threads, device, dtype, max_new_tokens, probe, min_tau, token_ids)
    import torch

    from draftsmith import hub
    from draftsmith.doctor import PROBES, diagnose
    from draftsmith.specs.edits import yaml_snippet

    if spec is None and draft is None:
        _bad_input("give TARGET and DRAFT folders, or --spec naming a spec whose checkpoints say them "
                   "(e.g. `draftsmith doctor --spec demo`)")
    if draft == "":   # typer's Path("") would be the current folder, which nobody named
        _bad_input("the draft is an empty string: give the draft's folder, or leave it out for the spec's "
                   "checkpoints.draft")
    torch.set_num_threads(threads or 1)   # auto: timed on the first model assembled (tune below)
    try:
        target = None if target is None else hub.target_folder(target, console=err)
    except DraftsmithError as e:   # a cache that cannot be written ($DRAFTSMITH_CACHE a file), a fetch that failed
        _bad_input(e)              # (FetchError), a broken plugin: bad input, not doctor's 1 for low acceptance

    try:
        # an empty --spec: load_spec refuses it; DRAFT is an argument here, not generate's --draft option
        spec_ref = spec if spec is not None else detect_spec(draft, target, "DRAFT")
        dx = diagnose(spec_ref, target, draft, probes=PROBES if probe is None else [probe],
                      max_new_tokens=max_new_tokens, min_tau=min_tau, search=search, dtype=dtype, device=device,
                      tune=None if threads else _auto_threads(probe, device))
    except (DraftsmithError, OSError) as e:   # the spec, a folder, an argument: said (a bug is not: exit 70)
        _bad_input(_as_options(e, "--token-ids" if token_ids is not None else "--probe" if probe is not None
                               else "--probe (its default texts)"))
    steps = dx.spec.decoding.steps
    table = Table(title=f"acceptance at draft positions p1..p{steps}: spec {escape(dx.spec.name)}, greedy chain, "
                        f"{max_new_tokens} tokens per probe")
    table.add_column("reading", overflow="fold")   # two changes make a long name: it wraps, the numbers do not
    table.add_column("tau", justify="right", no_wrap=True, min_width=4)
    # a column a position while they fit beside a readable name (7 characters each); past that one column that wraps
    split = steps <= POSITION_COLUMNS
    positions = [f"p{i + 1}" for i in range(steps)] if split else [f"p1..p{steps}"]
    for header in positions:
        table.add_column(header, justify="right", no_wrap=split, min_width=4)
    table.add_column("loss", justify="right", no_wrap=True, min_width=5)  # the draft's teacher-forced loss, nats
    table.add_column("note", no_wrap=True)
    errors: list[str] = []                      # distinct reasons a reading did not load, numbered in the notes
    for c in [dx.base, *dx.candidates[:12]]:
        name = "spec as given" if not c.changes else c.describe()
        if c.measure is None:
            errors += [] if c.error in errors else [c.error or "?"]
            table.add_row(escape(name), "-", *["-"] * len(positions), "-",
                          f"does not load ({errors.index(c.error or '?') + 1})")
        else:
            note = "fix" if c is dx.fix else ""
            loss = "-" if c.loss is None else f"{c.loss:.3f}"
            per = [f"{a:.2f}" for a in c.measure.per_position]
            table.add_row(escape(name), f"{c.tau:.2f}", *(per if split else [" ".join(per)]), loss, note,
                          style="bold green" if c is dx.fix else None)
    out.print(table)
    for i, error in enumerate(errors, 1):
        out.print(f"({i}) {escape(error)}", highlight=False)
    if len(dx.candidates) > 12:
        out.print(f"({len(dx.candidates) - 12} more readings tried, none better)")
    if dx.not_applicable:
        out.print(f"not applicable to this spec's components: {escape(', '.join(dx.not_applicable))}")
    if dx.base.measure is None and dx.fix is None:   # no reading loads the pair either: the spec does not fit it
        tried = (f"none of the {len(dx.candidates)} other readings tried loads it either" if dx.candidates else
                 "the other readings were not tried: a file fault fails every reading alike" if dx.base.fault else
                 "the other readings were not tried: --search tries them")
        _bad_input(f"the spec as given does not load: {dx.base.detail or dx.base.error}\n({tried})")
    if not dx.low:
        out.print(f"[green]acceptance is fine[/green]: tau {dx.base.tau:.2f} >= {_bar(dx, min_tau)} "
                  f"({dx.seconds:.1f} s)")
        if dx.fix is not None:   # --search: the change is said as when acceptance is low, ready to paste
            out.print(f"but a different reading does better ({len(dx.candidates)} tried): "
                      f"{escape(dx.fix.describe())}  (tau {dx.fix.tau:.2f}); in the spec:")
            out.print(escape(yaml_snippet(dx.fix.changes)), highlight=False)
        elif dx.candidates:
            out.print(f"no other reading does better ({len(dx.candidates)} tried)")
        else:   # a flipped setting can cost tau and still leave it above min_tau (4.69 -> 3.17 on the demo pair)
            out.print("the other readings were not tried: --search tries them, and says whether one does better")
        raise typer.Exit(0)
    why = (f"the spec as given does not load: {dx.base.error}" if dx.base.measure is None
           else f"acceptance is low: tau {dx.base.tau:.2f} < {_bar(dx, min_tau)}")
    out.print(f"[red]{escape(why)}[/red]")
    if dx.fix is None and not dx.candidates:   # --no-search: nothing was tried, so nothing can be concluded
        out.print("the other readings were not tried (--no-search): without it doctor tries them, and says whether "
                  "one does better")
        raise typer.Exit(1)
    loaded = sum(c.measure is not None for c in dx.candidates)
    tried = f"{len(dx.candidates)} tried, {loaded} loaded, {dx.seconds:.1f} s"   # said alike with a fix or none
    if dx.fix is None:   # the spec as given loaded (one that did not, with no fix, was refused above)
        out.print(f"no reading tried does better ({tried}): "
                  "the spec reads this draft as well as any reading tried; its acceptance on this probe is the "
                  "draft's own (weak or under-trained, text unlike its training data, or made for another target)")
        raise typer.Exit(1)
    gain = (f", draft loss {dx.fix.loss:.3f} vs {dx.base.loss:.3f}"
            if dx.fix.loss is not None and dx.base.loss is not None else "")
    out.print(f"[bold]fix[/bold] ({tried}): {escape(dx.fix.describe())}  (tau {dx.fix.tau:.2f}{gain}); in the spec:")
    out.print(escape(yaml_snippet(dx.fix.changes)), highlight=False)
    raise typer.Exit(1)


def _bad_input(e: object) -> NoReturn:
    """``e`` said on stderr with the notes a draftsmith error carries (as the command line prints one), exit 2."""
    notes = "".join(f"\n{n}" for n in getattr(e, "__notes__", ()))
    typer.echo(f"error: {e}{notes}", err=True)
    raise typer.Exit(2) from None


POSITION_COLUMNS = 8   # draft positions shown a column each; a longer chain shares one column

def _bar(dx, min_tau: float | None) -> str:
    """The bar acceptance was judged by, said with why where it is no --min-tau and not 2.0 (a short chain's)."""
    if min_tau is not None or dx.min_tau == 2.0:
        return f"{dx.min_tau}"
    return (f"{dx.min_tau} (the default bar for the spec's {dx.spec.decoding.steps}-step chain, half its reach: "
            "1 + steps / 2)")


DIAGNOSE_OPTIONS = {"max_new_tokens": "--max-new-tokens", "min_tau": "--min-tau"}
OPTION_WORDS = re.compile(r"\b(?:max_new_tokens|min_tau)\b")   # diagnose()'s argument names inside a problem


def _as_options(e: BaseException, probe: str = "--probe") -> object:
    """diagnose()'s own argument problems said as doctor's options: the chain minimum of --max-new-tokens (one whole
    chain step of the spec's, known once the spec is loaded, checked by diagnose() before any checkpoint is read)
    is doctor's rule, not repeated here; the probe's and the token count's problems (ids outside the vocabulary, a
    probe or a run past the context) name ``probe``, the option that gave it. Any other error as it is."""
    from draftsmith.errors import ArgumentError

    if not (isinstance(e, ArgumentError) and e.where == "diagnose()"):
        return e
    names = {**DIAGNOSE_OPTIONS, "probe": probe, "probes": probe}
    named = []
    for problem in e.problems:   # each starts with the argument's name: "max_new_tokens is 4; ...", "probe: ..."
        word, space, rest = problem.partition(" ")
        head, colon, _ = word.partition(":")
        rest = OPTION_WORDS.sub(lambda m: DIAGNOSE_OPTIONS[m[0]], rest)   # "a 16-token prompt + max_new_tokens 8"
        named.append(names.get(head, head) + colon + (word[len(head) + 1:] if colon else "") + space + rest)
    return "\n  ".join(named)


def _auto_threads(probe, device: str):
    """--threads auto: the fastest count for a short chain of the first model doctor assembles (the spec as
    given), kept for every reading; the choice and its times are said on stderr."""
    from draftsmith.doctor import PROBES
    from draftsmith.threads import auto_threads

    def tune(model) -> None:   # what measure() runs: a greedy chain of the spec's steps, stop tokens off
        chain = dict(max_new_tokens=8, stop=[], topk=1, steps=model.spec.decoding.steps)
        choice = auto_threads(lambda: model.generate(PROBES[0] if probe is None else probe, **chain), device)
        err.print(f"threads {escape(choice.said('a chain of 8 tokens'))}", soft_wrap=True)
    return tune


def _checked(threads: str, device: str, dtype: str, max_new_tokens: int, probe: Optional[str],
             min_tau: float | None = None, token_ids: Optional[str] = None
             ) -> tuple[int | None, Optional[str | list[int]]]:
    """The options checked before anything is read or run, every problem at once (exit 2 naming each option);
    returns the thread count (None: auto) and the probe: its text (an @FILE read), its --token-ids, or None for
    the default probes."""
    from draftsmith.doctor import min_tau_ok
    from draftsmith.options import check_device, collect, float_name, parse_threads, parse_token_ids

    problems: list[str] = []

    said = functools.partial(collect, problems)   # check(*args), its problem kept
    count = said(parse_threads, threads)
    said(check_device, device)
    said(float_name, dtype)
    if token_ids is not None and probe is not None:
        problems.append("--probe and --token-ids both give the probe: give one")
    ids = said(parse_token_ids, token_ids) if token_ids is not None else None
    problems += setting_problems(max_new_tokens)   # generate()'s bounds (the spec's chain: diagnose())
    if min_tau is not None and not min_tau_ok(min_tau):
        problems.append(f"--min-tau {min_tau}: allowed a finite number >= 0 (the tau below which the readings are "
                        "tried)")
    if token_ids is None and probe is not None:
        probe = said(_probe_file, probe[1:]) if probe.startswith("@") else probe
        if probe == "":
            problems.append("--probe is empty; give the probe text, or @FILE of a file that holds some")
    if problems:
        _bad_input("\n  ".join(problems))
    return count, ids if token_ids is not None else probe


def _probe_file(name: str) -> str:
    """The text of ``--probe @FILE`` (an OptionError saying why not): a regular file of at most
    limits.PROBE_BYTES, checked before it is opened (a FIFO would block forever, /dev/zero never ends) and read
    with a bound (a /proc file says size 0)."""
    import os
    import stat

    from draftsmith import limits
    from draftsmith.assembler.checkpoint import not_regular
    from draftsmith.errors import OptionError, short_text

    where = f"--probe @{short_text(name, 300)}"
    try:
        mode, size = (st := os.stat(name)).st_mode, st.st_size
        if not stat.S_ISREG(mode):
            raise OptionError(f"{where}: is {not_regular(mode)}; the probe must be a regular text file")
        if size > limits.PROBE_BYTES:
            raise OptionError(f"{where}: is {size} bytes; a probe file holds at most {limits.PROBE_BYTES} "
                              "(draftsmith/limits.py)")
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))   # never blocks, even if swapped for a FIFO
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise OptionError(f"{where}: is not a regular file; the probe must be a regular text file")
            data = f.read(limits.PROBE_BYTES + 1)
        if len(data) > limits.PROBE_BYTES:
            raise OptionError(f"{where}: holds more than {limits.PROBE_BYTES} bytes (draftsmith/limits.py)")
        return data.decode("utf-8")
    except OptionError:
        raise
    except (OSError, ValueError) as e:   # ValueError: a NUL in the name; UnicodeDecodeError: not UTF-8 text
        why = getattr(e, "strerror", None) or (f"not UTF-8 text ({short_text(str(e), 200)})"
                                                if isinstance(e, UnicodeDecodeError) else short_text(str(e), 200))
        raise OptionError(f"{where}: cannot read the file ({why})") from None
