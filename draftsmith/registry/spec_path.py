"""The user's spec folders: ``DRAFTSMITH_SPEC_PATH``, a list of folders (separated by ``os.pathsep``, as PATH) whose
``*.yaml`` / ``*.yml`` files are named specs, as a plugin's :class:`~draftsmith.hooks.SpecSource` records are, with
no Python: ``draftsmith.load_spec("myfamily")``, ``--spec myfamily`` and ``draftsmith list`` find them, listed with
their folder as provider. A file registers under its top-level ``name:``; a file without a readable one is
skipped, not an error, but said (:func:`scan_folder` gives each with a reason: ``draftsmith list`` prints them, and a
spec not found by a file's stem names it);
the spec itself is read, checked and reported only when it is loaded, as a plugin's is. YAML stays data: a folder
holds no code, so it provides no components and no layout detector (a detector is code: a plugin's hook).

A file whose ``name:`` ends in ``.yaml`` / ``.yml`` is skipped, said with that reason (no other spec stops working):
``--spec`` and ``load_spec`` read such a reference as a file path, so the name would load a file of the working
directory instead.
A file reached twice (a symlink to a sibling, or to a file of another folder of the path) is one spec, not a
clash."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import yaml

from draftsmith import limits
from draftsmith.errors import NotFound, short, short_text
from draftsmith.hooks import SpecSource
from draftsmith.yaml_places import SAFE_LOADER, STR

SPEC_PATH = "DRAFTSMITH_SPEC_PATH"


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
    string, by file name. A name ending in ``.yaml`` / ``.yml`` is skipped, said (:func:`scan_folder`): as a reference
    (``--spec``, ``load_spec``) it is read as a file path, never as this spec's name."""
    return scan_folder(folder)[0]


def scan_folder(folder: Path) -> tuple[list[SpecSource], list[tuple[Path, str]]]:
    """:func:`folder_specs`, and each ``*.yaml`` / ``*.yml`` file of ``folder`` it skips (no top-level string
    ``name:`` can be read), with a short reason, by file name: a skipped file is not an error (one bad file does not
    stop every command), but it is said (``draftsmith list``, and ``load_spec`` of a name equal to its stem)."""
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    out, skipped = [], []
    for p in files:
        name, why = read_name(p)
        if name is None:
            skipped.append((p, why or "no top-level name:"))
            continue
        if (suffix := Path(name).suffix) in (".yaml", ".yml"):
            stem = short(name[: -len(suffix)] or "NAME")
            skipped.append((p, f"its name: {short(name)} ends in {suffix}, which --spec and load_spec read as a file "
                               f"path, so they would never find this file; write name: {stem}"))
            continue
        out.append(SpecSource(name=name, path=p))
    return out, skipped


def declared_name(path: Path) -> str | None:
    """The top-level ``name:`` of a YAML file, a non-empty string, or None: read from the event stream up to that
    key's value (nothing is built; a list or mapping given as name: is read to its end only to tell a YAML error
    in it); a file that is not a regular file of at most ``limits.SPEC_BYTES`` of UTF-8 text, or not a mapping,
    has none."""
    return read_name(path)[0]


def read_name(path: Path) -> tuple[str | None, str | None]:
    """(:func:`declared_name`, None), or (None, why the file has no name): a short reason, as
    ``name: 123 is not a string`` or ``no top-level name: (a YAML error at line 3)``."""
    try:
        if not path.is_file():
            return None, "not a regular file"
        if (size := path.stat().st_size) > limits.SPEC_BYTES:
            return None, f"over {limits.SPEC_BYTES} bytes ({size} bytes; a spec file is at most that)"
        text = path.read_bytes()[: limits.SPEC_BYTES].decode("utf-8-sig")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 text (byte {e.start})"
    except OSError as e:
        return None, f"could not be read: {short_text(e.strerror or str(e), 200)}"
    depth, is_key, after_name = 0, True, False   # depth 1: inside the top mapping, whose nodes alternate key, value
    events = yaml.parse(text, Loader=SAFE_LOADER)
    try:
        for event in events:
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
                if depth <= 0:
                    return None, "no top-level name:"
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            if depth == 0 and not isinstance(event, yaml.MappingStartEvent):
                what = "a list" if isinstance(event, yaml.SequenceStartEvent) else "a single value"
                return None, f"no top-level name: (the file is {what}, not a mapping)"
            if depth == 1:
                if not is_key and after_name:
                    _read_through(event, events)
                    return _string(event)
                after_name = is_key and isinstance(event, yaml.ScalarEvent) and event.value == "name"
                is_key = not is_key
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
    except yaml.YAMLError as e:   # broken before its name ends: no name (loading it by path says what is wrong)
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        return None, "no top-level name: (a YAML error" + (f" at line {mark.line + 1})" if mark else ")")
    return None, "no top-level name: (the file is empty)" if depth == 0 else "no top-level name:"


def _read_through(event: yaml.Event, events: Iterator[yaml.Event]) -> None:
    """Read ``events`` to the end of the list or mapping that ``event`` opens (nothing for a scalar): libyaml
    streams a collection's start before it finds the collection broken, so ``name: [unclosed`` is a YAML error
    (raised here), not a name that is a list."""
    depth = int(isinstance(event, yaml.CollectionStartEvent))
    while depth:
        inner = next(events)
        depth += isinstance(inner, yaml.CollectionStartEvent) - isinstance(inner, yaml.CollectionEndEvent)


_KINDS = {"tag:yaml.org,2002:bool": "a boolean", "tag:yaml.org,2002:int": "a number",
          "tag:yaml.org,2002:float": "a number", "tag:yaml.org,2002:null": "null"}


def _string(event: yaml.Event) -> tuple[str | None, str | None]:
    """A scalar event's value when YAML reads it as a non-empty string (``name: 123`` is an int, ``name:`` null),
    else (None, why not)."""
    if isinstance(event, yaml.MappingStartEvent):
        return None, "name: is a mapping, not a string"
    if isinstance(event, yaml.SequenceStartEvent):
        return None, "name: is a list, not a string"
    if not isinstance(event, yaml.ScalarEvent):
        return None, "name: is an alias, not a string"
    if not event.value.strip():
        return None, "name: is empty"
    tag = event.tag or yaml.resolver.Resolver().resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag in (STR, "!"):
        return event.value, None
    kind = _KINDS.get(tag, f"tagged {short_text(tag, 60)}")
    return None, f"name: {short_text(event.value, 60)} is not a string (YAML reads it as {kind}; quote it)"
