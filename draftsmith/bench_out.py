"""Where ``draftsmith bench --scale`` writes: its ``--out`` and ``--checkpoints`` folders, checked before any work
(:func:`check_folders`), so that a path that cannot be a folder is refused in one message and a user's folder is
never written over; a folder a previous run wrote (it holds :data:`RESULTS`) is taken again."""
from __future__ import annotations

import json
import os
from pathlib import Path

RESULTS = "results.json"   # written first, then after every row: what tells a folder a previous run wrote
TEMP = ".partial-"         # the prefix of write_atomic's temporary files (a run killed mid-write may leave one)


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a temporary file in the same folder, then os.replace,
    so a run killed while it writes leaves the previous results.json / results.md, never half of one. A failed write
    that names no file (a full disk) is raised naming ``path``, which the command says as ``error: PATH: why``."""
    path = Path(path)
    tmp = path.with_name(f"{TEMP}{path.name}.{os.getpid()}.tmp")   # open() keeps the umask's mode, as write_text
    try:
        with open(tmp, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException as e:   # KeyboardInterrupt too: the time limit that ends a GPU session's call
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename is None:   # a full disk: write() and close() name no file
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise


def check_folders(out: Path, checkpoints: Path, shapes) -> None:
    """An OptionError listing what makes ``out`` or ``checkpoints`` unusable, before any work: a path that is no
    folder and cannot be made one (a file, under a file, /proc), a shape's checkpoint folder that is a file, and
    an ``out`` that holds something but no results.json of a previous run, whose files (results.md, results.json,
    a PNG per shape) would be overwritten."""
    from draftsmith.errors import OptionError, short_list, short_text
    from draftsmith.paths import folder_problem

    found = [f"--out {short_text(out, 300)}: {why}"] if (why := folder_problem(out)) else []
    written = all((checkpoints / f"{name}-{kind}" / "config.json").is_file() for name in shapes
                  for kind in ("target", "draft"))   # nothing to write there: a read-only folder serves
    if not (found and checkpoints.is_relative_to(out)) and not written and (why := folder_problem(checkpoints)):
        found.append(f"--checkpoints {short_text(checkpoints, 300)}: {why}")
    if not found and (held := others(out)):
        which = (f"a {RESULTS} that is not one a previous `draftsmith bench --scale` wrote (a JSON list of shapes)"
                 if RESULTS in held else f"no {RESULTS} of a previous `draftsmith bench --scale`")
        found.append(f"--out {short_text(out, 300)}: holds {short_list(held, quote=False)} but {which}, and the "
                     "benchmark writes results.md, results.json and a PNG per shape there: give a new or empty "
                     "folder, or the --out of a previous run")
    found += [f"--out {short_text(out, 300)}: {f} is a folder (the benchmark writes that file there)"
              for f in (RESULTS, "results.md", *(f"{name}.png" for name in shapes)) if (out / f).is_dir()]
    found += [f"--checkpoints {short_text(checkpoints, 300)}: {name}-{kind} is not a folder (the benchmark writes "
              f"the {name} {kind} there)" for name in shapes for kind in ("target", "draft")
              if (checkpoints / f"{name}-{kind}").exists() and not (checkpoints / f"{name}-{kind}").is_dir()]
    if found:
        raise OptionError("\n".join(found))


def others(out: Path) -> list[str]:
    """What a folder holds when it is not one a previous run wrote (holding results.json as :func:`run_scale`
    writes it: a JSON list); [] for a new or empty folder, and for a previous run's. The temporary files of
    :func:`write_atomic` a killed run left are not counted."""
    from draftsmith import limits

    if not out.is_dir() or not (held := sorted(p.name for p in out.iterdir() if not p.name.startswith(TEMP))):
        return []
    try:
        f = out / RESULTS
        if f.is_file() and not f.is_symlink() and f.stat().st_size <= limits.JSON_BYTES:
            runs = json.loads(f.read_text(encoding="utf-8"))
            if isinstance(runs, list) and all(isinstance(r, dict) and "shape" in r for r in runs):
                return []
    except (OSError, ValueError):   # unreadable, not UTF-8, not JSON: not a previous run's
        pass
    return held
