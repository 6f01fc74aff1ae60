"""Ctrl-C during training: the first finishes the step, saves it and stops; a second stops at once.

A KeyboardInterrupt raised in the middle of a step can land between the optimizer's updates of the moments and of
the parameters, so the state at that moment is not one a checkpoint may hold. :func:`deferred` turns the first
SIGINT into a request the loop reads between steps; the loop saves the finished step (:func:`draftsmith.train.loop.
train`) and raises KeyboardInterrupt itself, so a run stopped by hand loses no finished step.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Request:
    """Whether Ctrl-C was pressed once (``asked``); the loop reads it after each step."""

    def __init__(self):
        self.asked = False


@contextlib.contextmanager
def deferred() -> Iterator[Request]:
    """SIGINT as a :class:`Request` while the block runs (in the main thread only: elsewhere a signal handler cannot
    be set, and the request stays unasked); the handler before it is put back on leaving. The handler writes
    nothing: a write from it into a stream the loop is writing raises a reentrant-call error."""
    request = Request()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum, frame):
        if request.asked:                       # the second Ctrl-C: at once, as without this block
            raise KeyboardInterrupt
        request.asked = True

    before = signal.signal(signal.SIGINT, handler)
    try:
        yield request
    finally:
        signal.signal(signal.SIGINT, before)
