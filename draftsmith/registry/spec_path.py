"""The user's spec folders: ``DRAFTSMITH_SPEC_PATH``, a list of folders (separated by ``os.pathsep``, as PATH) whose
``*.yaml`` / ``*.yml`` files are named specs, as a plugin's :class:`~draftsmith.hooks.SpecSource` records are, with
no Python: ``draftsmith.load_spec("myfamily")``, ``--spec myfamily`` and ``draftsmith list`` find them, listed with
their folder as provider. A file registers under its top-level ``name:`` (a file without one is not a named spec);
the spec itself is read, checked and reported only when it is loaded, as a plugin's is. YAML stays data: a folder
holds no code, so it provides no components and no layout detector (a detector is code: a plugin's hook).

A file whose ``name:`` ends in ``.yaml`` / ``.yml`` is refused (a SpecError naming the file): ``--spec`` and
``load_spec`` read such a reference as a file path, so the name would load a file of the working directory instead.
A file reached twice (a symlink to a sibling, or to a file of another folder of the path) is one spec, not a
clash."""
from __future__ import annotations

import os
from pathlib import Path

import yaml

from draftsmith import limits
from draftsmith.errors import NotFound, Problem, SpecError, short, short_text
from draftsmith.hooks import SpecSource

SPEC_PATH = "DRAFTSMITH_SPEC_PATH"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR = "tag:yaml.org,2002:str"


def spec_folders(value: str | None = None) -> list[Path]:
    """The folders ``value`` lists (``DRAFTSMITH_SPEC_PATH`` when None), absolute, in order, each once; empty entries
    are skipped, as in PATH. A leading ``~`` / ``~user`` of an entry is expanded (os.path.expanduser), as a shell
    expands it in an unquoted PATH-like assignment, so a quoted ``"~/specs"`` works too. One that is not a folder is
    a :class:`~draftsmith.errors.NotFound` naming it."""
    value = os.environ.get(SPEC_PATH, "") if value is None else value
    folders, seen = [], set()
    for entry in value.split(os.pathsep):
        if not entry:
            continue
        folder = Path(os.path.expanduser(entry)).absolute()
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "does not exist"
            raise NotFound(f"{SPEC_PATH} names {short_text(entry, 300)}, which {what} (it lists folders of spec "
                           f"YAML files, separated by {os.pathsep!r}; `{SPEC_PATH}= draftsmith ...` runs a command "
                           "without them)")
        if (real := folder.resolve()) not in seen:   # one folder named twice is one folder, not a clash
            seen.add(real)
            folders.append(folder)
    return folders


def folder_specs(folder: Path) -> list[SpecSource]:
    """A SpecSource for each ``*.yaml`` / ``*.yml`` file directly in ``folder`` whose top-level ``name:`` is a
    string, by file name. A name ending in ``.yaml`` / ``.yml`` is a SpecError naming the file: as a reference
    (``--spec``, ``load_spec``) it is read as a file path, never as this spec's name."""
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    out = []
    for p in files:
        if (name := declared_name(p)) is None:
            continue
        if (suffix := Path(name).suffix) in (".yaml", ".yml"):
            raise SpecError(str(p), [Problem(
                "name", f"a spec of a {SPEC_PATH} folder cannot be named {short(name)}: a name ending in {suffix} "
                f"is read as a file path by --spec and load_spec, so it would never find this file",
                hint=f"Write name: {short(name[: -len(suffix)] or 'NAME')} (without {suffix}).")])
        out.append(SpecSource(name=name, path=p))
    return out


def declared_name(path: Path) -> str | None:
    """The top-level ``name:`` of a YAML file, a non-empty string, or None: read from the event stream up to that
    key (nothing is built, nothing nested is followed); a file that is not a regular file of at most
    ``limits.SPEC_BYTES`` of UTF-8 text, or not a mapping, has none."""
    try:
        if not path.is_file() or path.stat().st_size > limits.SPEC_BYTES:
            return None
        text = path.read_bytes()[: limits.SPEC_BYTES].decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    depth, is_key, after_name = 0, True, False   # depth 1: inside the top mapping, whose nodes alternate key, value
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
                if depth <= 0:
                    return None
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            if depth == 0 and not isinstance(event, yaml.MappingStartEvent):
                return None
            if depth == 1:
                if not is_key and after_name:
                    return _string(event)
                after_name = is_key and isinstance(event, yaml.ScalarEvent) and event.value == "name"
                is_key = not is_key
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
    except yaml.YAMLError:   # a broken file before its name: no name (loading it by path says what is wrong)
        return None
    return None


def _string(event: yaml.Event) -> str | None:
    """A scalar event's value when YAML reads it as a non-empty string (``name: 123`` is an int, ``name:`` null)."""
    if not isinstance(event, yaml.ScalarEvent) or not event.value.strip():
        return None
    tag = event.tag or yaml.resolver.Resolver().resolve(yaml.ScalarNode, event.value, event.implicit)
    return event.value if tag in (_STR, "!") else None
