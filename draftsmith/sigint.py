"""Whether a Ctrl-C reached the command. A SIGINT that lands inside a library's import (torch, numpy, transformers'
lazy modules: the first second or two of a command) can be swallowed there and come back as another error (numpy's
"cannot load module more than once", a config "transformers cannot read") or as nothing at all; the command's
handler (:func:`install`, by :func:`draftsmith.console.main`) notes each one, and the CLI ends with 130 for an error
raised after one (:func:`draftsmith.cli.app.stop_if_interrupted`), never blaming the user's files."""
from __future__ import annotations

import _thread
import signal
import sys
import threading
from collections.abc import Callable

_seen = {"sigint": False}
_pending: dict[str, threading.Timer | None] = {"timer": None}   # a Ctrl-C a finalizer dropped, on its way


def _on_sigint(signum, frame) -> None:
    _seen["sigint"] = True
    signal.default_int_handler(signum, frame)   # KeyboardInterrupt, as Python's own handler


def install() -> Callable[[], bool]:
    """Note each SIGINT, then raise KeyboardInterrupt as Python's own handler does, until the returned function puts
    the handler before back and forgets the Ctrl-C (a program that calls :func:`draftsmith.console.main` and goes
    on: its next command is not taken as interrupted). Nothing is installed outside the main thread (Python sets
    signal handlers there only) or where SIGINT is not Python's default (a parent that ignores it, an embedding
    program's own handler)."""
    _seen["sigint"] = False
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return lambda: False
    before, hook = signal.signal(signal.SIGINT, _on_sigint), sys.unraisablehook

    def unraisable(info) -> None:
        # a Ctrl-C that lands in a finalizer (a __del__ the garbage collector runs) is dropped by Python with an
        # "Exception ignored in" traceback, and the command ran on to its end: raised again in the main flow, from
        # another thread (here it would land in this hook, which Python drops too)
        if isinstance(info.exc_value, KeyboardInterrupt):
            timer = _pending["timer"] = threading.Timer(0.01, _thread.interrupt_main)
            timer.daemon = True
            timer.start()
            return
        hook(info)

    sys.unraisablehook = unraisable

    def restore() -> bool:
        """Put the handlers before back; whether a Ctrl-C dropped in a finalizer had not reached the command yet
        (its timer is cancelled: the caller ends with 130, nothing leaks into a program that goes on)."""
        timer, _pending["timer"] = _pending["timer"], None
        left = timer is not None and timer.is_alive()
        if timer is not None:
            timer.cancel()
        signal.signal(signal.SIGINT, before)
        sys.unraisablehook = hook
        _seen["sigint"] = False
        return left
    return restore


def interrupted() -> bool:
    """Whether a Ctrl-C reached this process through :func:`install`'s handler: an error after it is its echo."""
    return _seen["sigint"]
