"""Paths the user gives, checked without torch (so a wrong one is said before the slow imports): a name that is
not UTF-8, a checkpoint folder that is missing or not a folder, a folder a command cannot write into."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from draftsmith.errors import CheckpointNotFound, short, short_text


def checkpoint_folder(folder: str | Path, label: str | None = None) -> Path:
    """``folder`` as a Path if it is a folder; else a CheckpointNotFound that says why, ``label`` naming it
    (default 'checkpoint folder PATH'): a name too long for the file system, a NUL, a loop of links or a folder
    that may not be read is said so, not an internal error."""
    folder = Path(folder)
    try:
        what = None if stat.S_ISDIR(folder.stat().st_mode) else "is not a folder"
    except (FileNotFoundError, NotADirectoryError):
        what = "does not exist"
    except (OSError, ValueError) as e:   # ENAMETOOLONG, ELOOP, EACCES; ValueError: a NUL in the name
        what = f"cannot be read: {getattr(e, 'strerror', None) or e}"
    what = what or utf8_problem(folder)
    if what is not None:
        raise CheckpointNotFound(f"{label or f'checkpoint folder {short_text(folder, 300)}'} {what}")
    return folder


def config_file(folder: Path) -> Path | None:
    """The config file of a checkpoint folder: ``config.json``, else Mistral's ``params.json`` (a broken link is
    there too: regular_file says so when it is read); None for neither."""
    return next((folder / n for n in ("config.json", "params.json")
                 if (folder / n).exists() or (folder / n).is_symlink()), None)


def required_config(folder: Path) -> Path:
    """The config file of a checkpoint folder (:func:`config_file`); a CheckpointNotFound for a folder without one,
    which assemble() and the command line check before the slow imports."""
    if (file := config_file(folder)) is None:
        raise CheckpointNotFound(f"{short_text(folder, 300)}: no config.json or params.json (a checkpoint folder "
                                 "needs a config + weights)")
    return file


def utf8_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be opened by the libraries that read and write checkpoints, whatever it holds, or None:
    safetensors, torch's memory-mapped load and tokenizers take UTF-8 paths only, and a name with a byte that is not
    UTF-8 (b'\\xff') comes to Python as a lone surrogate ('\\udcff') that they refuse with an error of their own."""
    if _encodes(str(path)):
        return None
    part = next(p for p in Path(path).parts if not _encodes(p))
    try:
        shown = short(os.fsencode(part))      # the name as the file system holds it: b'\xff'
    except UnicodeEncodeError:                # a surrogate no file system name decodes to
        shown = short(part)
    return f"has a name that is not valid UTF-8 ({shown}); safetensors and torch open only UTF-8 paths: rename it"


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def folder_problem(path: str | Path) -> str | None:
    """Why a command could not write into the folder ``path`` (creating it and its missing parents), or None: it is
    a folder, or its nearest existing ancestor is, and a folder can be made there (tried: a temporary one is made
    and removed, since permission bits do not tell a read-only disk, /proc or root's rights apart). Checked
    before any work, so a path under a regular file or in /proc is refused in one message, not by an internal
    error once the slow part ran."""
    if "\0" in str(path):
        return "a path cannot contain a NUL character"
    if why := utf8_problem(path):
        return why
    path, place = Path(path), None
    try:
        if path.is_symlink() and not path.exists():
            return "is a broken link"
        if path.exists() and not path.is_dir():
            return "is not a folder"
        place = next(p for p in (path, *path.parents) if p.exists())
        if not place.is_dir():
            return f"cannot be created: {short_text(place, 300)} is not a folder"
        os.rmdir(tempfile.mkdtemp(prefix=".draftsmith-probe-", dir=place))
    except OSError as e:   # a name too long, no permission, a read-only disk, /proc
        where = "" if place in (None, path) else f" in {short_text(place, 300)}"
        return f"cannot be {'written' if place == path else 'created'}{where} ({e.strerror or e})"
    return None
