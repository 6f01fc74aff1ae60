"""The ``draftsmith`` command (started by :func:`draftsmith.console.main`). One module per group of verbs registers
its commands on :data:`app`: ``run`` (generate, bench), ``specs`` (validate, list, inspect, convert), ``train``,
``doctor``.

Errors: draftsmith's own (:class:`draftsmith.errors.DraftsmithError`: a bad spec, checkpoint, argument or option)
print as one message and exit 1, never a traceback; a bad option value (:class:`draftsmith.errors.OptionError`)
exits 2 in every command, as typer's own usage errors do, and so do ``train``'s checks before any work, any bad
input to ``doctor`` (whose 1 says acceptance is low) and a draft folder no detector knows when no ``--spec`` is
given; anything else prints one line and a hint to rerun with ``draftsmith --debug ...``, which shows the traceback
(exit 70, EX_SOFTWARE). A reader that left (a closed pipe) ends the command quietly with 141; a stdout that cannot
be written (closed, a full disk) is one line and exit 74 (EX_IOERR). Messages are printed as plain text, so user text
(prompts, file and tensor names) is never read as rich markup.
"""
from __future__ import annotations

from draftsmith.cli import doctor, run, specs, train  # noqa: F401  (importing them registers the commands)
from draftsmith.cli.app import INTERNAL_ERROR, OUTPUT_ERROR, USAGE_ERROR, USER_ERROR, app, report

__all__ = ["INTERNAL_ERROR", "OUTPUT_ERROR", "USAGE_ERROR", "USER_ERROR", "app", "report"]
