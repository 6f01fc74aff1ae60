"""Helpers of the hardening tests: every bad input must end in a DraftsmithError within a second."""
import contextlib
import gc
import json
import os
import time
from pathlib import Path

import pytest

from draftsmith.errors import DraftsmithError

SECOND = 1.0


@contextlib.contextmanager
def refused(seconds: float = SECOND, kind: type[BaseException] = DraftsmithError):
    """The block must raise ``kind`` (a DraftsmithError by default) within ``seconds``; yields a holder whose
    ``.value`` is the exception."""
    class Holder:
        value = None

    holder = Holder()
    with pytest.raises(kind) as info, collector_paused():
        start = time.perf_counter()
        try:
            yield holder
        finally:
            took = time.perf_counter() - start
    holder.value = info.value
    assert took < seconds, f"took {took:.2f}s: {info.value}"
    assert len(str(info.value)) < 5000, f"message of {len(str(info.value))} characters"


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


def edit_config(folder: Path, name: str = "config.json", **changes) -> None:
    path = folder / name
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    path.write_text(json.dumps(cfg))


def make_fifo(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path
