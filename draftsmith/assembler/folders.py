"""Where a spec's checkpoints are: an explicit folder, else the spec's ``checkpoints.<which>`` (relative to its
file, or ``cache:NAME``), checked without torch, so that a wrong path is said before the slow imports."""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable

from draftsmith.errors import CheckpointNotFound, OptionError, Problem, short_text
from draftsmith.paths import checkpoint_folder, required_config
from draftsmith.specs.schema import Spec


def tidy(path: Path) -> Path:
    """``path`` without its '.' and 'name/..' parts, as model.folders and the notes show it (a built-in spec's
    ``specs/builtin/../../demo_data/target`` is ``demo_data/target``). os.path.normpath rather than Path.resolve:
    it keeps the names the user wrote (a relative path stays relative, a symlinked ~/models is not replaced by
    where it points). normpath drops 'link/..' without following the link, so where that would name another folder
    than the one the path reaches, the path is resolved instead; one that does not exist is kept as written, for
    the error that says so."""
    norm = Path(os.path.normpath(path))
    if norm == path:
        return path
    try:
        return norm if os.path.samefile(norm, path) else path.resolve()
    except OSError:   # either is missing
        return path.resolve() if path.exists() else path


def spec_relative(spec: Spec, ref: str | Path) -> Path:
    """A spec's checkpoint path: a relative one is relative to the spec's own file (a built-in spec's too)."""
    path = Path(ref)
    return tidy(Path(spec._source).parent / path) if not path.is_absolute() and spec._source else path


def checkpoint_ref(spec: Spec, which: str) -> str | None:
    """The spec's own ``checkpoints.<which>``: a ``cache:NAME`` as written, a folder relative to the spec's file,
    None when the spec names none (nothing is fetched or checked)."""
    from draftsmith import hub

    ref = getattr(spec.checkpoints, which)
    return ref if ref is None or hub.cache_name(ref) is not None else str(spec_relative(spec, ref))


def str_path(x: object) -> bool:
    """A path given as text: a str, or an os.PathLike whose path is one (pathlib's, not a bytes path)."""
    return isinstance(x, str) or isinstance(x, os.PathLike) and isinstance(os.fspath(x), str)


def checkpoint_dir(spec: Spec, given: str | Path | None, which: str) -> Path:
    """An explicit folder, else the spec's ``checkpoints.<which>`` (relative paths resolve against the spec
    file, so a plugin's specs can ship their own checkpoints as package data); ``cache:NAME`` is a pretrained
    target fetched once into the user's cache (:mod:`draftsmith.hub`)."""
    from draftsmith import hub

    if given is not None and not str_path(given):   # Path(5) is pathlib's TypeError; bytes paths are not taken
        raise OptionError(f"{which}: a folder path (a str or os.PathLike), got the {type(given).__name__} "
                          f"{short_text(repr(given), 100)}")
    if isinstance(given, str) and not given:   # Path("") is the current folder, reported as no checkpoint
        raise OptionError(f"the {which} folder is an empty string: give the folder of the {which} checkpoint, or "
                          f"none at all for the spec's checkpoints.{which}")
    ref = given if given is not None else checkpoint_ref(spec, which)
    if hub.cache_name(ref) is not None:
        return hub.resolve(ref)
    if ref is None:
        hint = f"Give the {which} folder ({which}=PATH, or --{which} PATH on the command line)."
        raise spec.error([Problem(f"checkpoints.{which}", f"no {which} folder given and the spec names none",
                                  hint=hint)])
    written = getattr(spec.checkpoints, which) if given is None else None   # the spec's own, as its file says it
    label = f"{which} checkpoint folder '{short_text(ref, 300)}'"   # short_text escapes once: a newline reads \n
    if written is not None and not Path(written).is_absolute():
        base = ("its file" if spec._source and Path(spec._source).is_file() else
                "the current folder: the spec has no file" if Path(spec._source or ".").parent == Path(".") else
                f"'{short_text(Path(spec._source).parent, 200)}', its source's folder")
        label += f" (the spec's checkpoints.{which}: '{short_text(written, 200)}', relative to {base})"
    return checkpoint_folder(tidy(Path(ref)), label)


def checkpoint_dirs(spec: Spec, target: str | Path | None, draft: str | Path | None) -> tuple[Path, Path]:
    """(target, draft) folders, as :func:`checkpoint_dir` finds them, each holding a config file (config.json or
    params.json; assemble() says one without before transformers' import); where both are missing, or without a
    config, one error says both, each named."""
    found = _found({which: functools.partial(_folder, spec, given, which)
                    for which, given in (("target", target), ("draft", draft))})
    return found["target"], found["draft"]


def _folder(spec: Spec | None, given: str | Path | None, which: str) -> Path:
    folder = checkpoint_dir(spec, given, which)
    try:
        required_config(folder)
    except CheckpointNotFound as e:   # which folder it is: one folder given as both is said twice
        raise CheckpointNotFound(f"{which}: {e}") from None
    return folder


def given_dirs(target: str | Path | None = None, draft: str | Path | None = None) -> None:
    """The folders given by path (not a cached target's ``cache:NAME``) checked as :func:`checkpoint_dirs` checks
    them, before a spec is read: the command line says a wrong path, or a folder without a config file, before it
    imports torch (seconds)."""
    from draftsmith import hub

    _found({which: functools.partial(_folder, None, given, which)
            for which, given in (("target", target), ("draft", draft))
            if given is not None and hub.cache_name(given) is None})


def _found(finds: dict[str, Callable[[], Path]]) -> dict[str, Path]:
    """Each folder its call finds; a CheckpointNotFound for the missing ones, where two are, one error says both."""
    missing, found = [], {}
    for which, find in finds.items():
        try:
            found[which] = find()
        except CheckpointNotFound as e:
            missing.append(e)
    if len(missing) == 2:
        raise CheckpointNotFound(f"{missing[0]}\n  {missing[1]}")   # the second line: indented, as an error's
    if missing:
        raise missing[0]
    return found


def spec_own(spec: Spec, given: str | Path | None, folder: Path, which: str) -> bool:
    """Whether ``folder`` (given as ``given``) is the spec's own ``checkpoints.<which>`` (a built-in spec's shipped
    draft): none was given, or the one given is that folder."""
    ref = checkpoint_ref(spec, which)
    try:
        return given is None or (ref is not None and os.path.samefile(ref, folder))
    except OSError:   # the spec's folder is missing, or a cache:NAME
        return False
