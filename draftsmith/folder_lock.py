"""One process at a time in an output folder (train's --out, convert's OUT): an exclusive lock on the folder's own
descriptor, with no lock file (the new-or-empty rules read the folder's contents). The lock goes with the process,
however it ends; a second process is told at once, never made to wait."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:   # Windows: processes on one folder are not kept apart
    fcntl = None


@contextmanager
def exclusive(folder: Path) -> Iterator[bool]:
    """Hold ``folder``'s lock for the block: yields True, or False at once (nothing held) where another process
    holds it."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
        yield True
    finally:
        os.close(fd)
