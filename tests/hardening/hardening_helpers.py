"""Helpers of the hardening tests: every bad input must end in a DraftsmithError within a second of work."""
import contextlib
import gc
import os
import time
from pathlib import Path

import pytest

from draftsmith.errors import DraftsmithError

SECOND = 1.0
WAIT_FACTOR = 4


@contextlib.contextmanager
def refused(seconds: float = SECOND, kind: type[BaseException] = DraftsmithError):
    """The block must raise ``kind`` (a DraftsmithError by default) within ``seconds`` of work (:func:`quick`);
    yields a holder whose ``.value`` is the exception."""
    class Holder:
        value = None

    holder = Holder()
    with pytest.raises(kind) as info, quick(seconds):
        yield holder
    holder.value = info.value
    assert len(str(info.value)) < 5000, f"message of {len(str(info.value))} characters"


@contextlib.contextmanager
def quick(seconds: float = SECOND):
    """The block must take under ``seconds`` of this process's CPU time (the work: on a 2-core machine that also
    runs other jobs the wall clock of 0.45 s of work read 1.01 s), and under ``WAIT_FACTOR`` times as long on the
    wall clock (a wait: a hang, a sleep). The cyclic collector is paused (:func:`collector_paused`)."""
    with collector_paused():
        start, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:   # checked whether the block raised or not (an error it raises is what refused() times)
            took, worked = time.perf_counter() - start, time.process_time() - cpu
            assert worked < seconds, f"worked {worked:.2f}s of CPU time; at most {seconds}s"
            assert took < WAIT_FACTOR * seconds, f"took {took:.2f}s on the wall clock; at most {WAIT_FACTOR * seconds}s"


@contextlib.contextmanager
def collector_paused():
    """Time draftsmith, not Python's cyclic collector walking the test process's heap: late in a full run, a
    collection the block's allocations trigger scans everything earlier tests left (one run took 1.2 s for 0.3 s
    of work)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def copy_folder(src: Path, dst: Path) -> Path:
    """A copy of a checkpoint folder (regular files), to corrupt one file of it."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def make_fifo(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path
