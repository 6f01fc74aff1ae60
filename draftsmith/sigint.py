"""Whether a Ctrl-C reached the command. A SIGINT that lands inside a library's import (torch, numpy, transformers'
lazy modules: the first second or two of a command) can be swallowed there and come back as another error (numpy's
"cannot load module more than once", a config "transformers cannot read") or as nothing at all; the command's
handler (:func:`install`, by :func:`draftsmith.console.main`) notes each one, and the CLI ends with 130 for an error
raised after one (:func:`draftsmith.cli.app.stop_if_interrupted`), never blaming the user's files."""
from __future__ import annotations

import signal

_seen = {"sigint": False}


def _on_sigint(signum, frame) -> None:
    _seen["sigint"] = True
    signal.default_int_handler(signum, frame)   # KeyboardInterrupt, as Python's own handler


def install() -> None:
    """Note each SIGINT, then raise KeyboardInterrupt as Python's own handler does; not where SIGINT is not Python's
    default (a parent that ignores it, an embedding program's own handler)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


def interrupted() -> bool:
    """Whether a Ctrl-C reached this process through :func:`install`'s handler: an error after it is its echo."""
    return _seen["sigint"]
