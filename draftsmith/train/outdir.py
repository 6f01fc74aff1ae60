"""The ``--out`` folder of a training run: one run at a time (:func:`held`), and what a failed fresh start added
is taken away again (:func:`undone_on_failure`)."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from draftsmith.errors import short_text
from draftsmith.folder_lock import exclusive
from draftsmith.train.checks import TrainError



@contextmanager
def held(out: Path) -> Iterator[None]:
    """``out`` for this run alone: an exclusive lock on the folder's own descriptor (no lock file, since the
    new-or-empty --out rule and :func:`undone_on_failure` read the folder's contents), made here when it is new.
    A second run on it is refused at once with a TrainError; the lock goes with the process, however it ends. A
    folder made here and left empty is removed, but only by the run that held it."""
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    with exclusive(out) as mine:
        if not mine:
            raise TrainError([("out", f"{short_text(out, 300)} is in use by another draftsmith train (it holds the "
                                      "folder's lock); wait for that run to end, or give another --out")])
        try:
            yield
        finally:
            if made and out.is_dir() and not any(out.iterdir()):
                out.rmdir()


@contextmanager
def undone_on_failure(out: Path, enabled: bool) -> Iterator[None]:
    """What the block adds to ``out`` is removed again when it fails or is interrupted (``enabled``), so that the
    next run is not refused for an --out holding a draft without trainer.pt, nor resumes a start it never
    trained; an ``out`` it made and left empty goes too."""
    existed = out.is_dir()
    before = set(out.iterdir()) if existed else set()
    try:
        yield
    except BaseException:
        if enabled:
            for p in (set(out.iterdir()) - before) if out.is_dir() else ():
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            if not existed and out.is_dir() and not any(out.iterdir()):
                out.rmdir()
        raise
