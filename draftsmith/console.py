"""The ``draftsmith`` console script and ``python -m draftsmith``: the command's modules are imported inside
:func:`main`, so that a Ctrl-C while they load (typer, rich: the first fraction of a second) ends the command as one
at any later moment does (exit 130, no traceback) instead of as a traceback from the import machinery; each SIGINT
is noted (:mod:`draftsmith.sigint`), so that one a library swallowed still ends the command with 130."""
from __future__ import annotations

import atexit
import signal
import sys

INTERRUPTED = 130   # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C
_shutdown_quiet: list[bool] = []   # whether the interpreter's exit already ignores Ctrl-C (registered once)


def main() -> None:
    from draftsmith import sigint

    restore = sigint.install()
    try:
        try:
            from draftsmith.cli import app
        except KeyboardInterrupt:
            sys.exit(INTERRUPTED)
        app()
    finally:   # a program that called main() goes on with its own handler, its next command not interrupted
        if not _shutdown_quiet:   # registered after the command's imports, so it runs before their exit callbacks:
            # a Ctrl-C while torch's finalizers run at exit (a second one after a run stopped) is no traceback
            atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)
            _shutdown_quiet.append(True)
        if restore():   # a Ctrl-C dropped in a finalizer as the command ended
            sys.exit(INTERRUPTED)
