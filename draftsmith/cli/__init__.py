"""The ``draftsmith`` command. One module per group of verbs registers its commands on :data:`app`:
``run`` (generate, bench), ``specs`` (validate, list, inspect, convert), ``train``, ``doctor``."""
from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Speculative-decoding draft models from YAML.")
out = Console(width=max(110, Console().width))  # tables stay readable when piped (80 columns by default)
err = Console(stderr=True)

from draftsmith.cli import doctor, run, specs, train  # noqa: E402,F401  (registers the commands)


def main() -> None:  # pragma: no cover
    app()
