"""Where a spec file is and what it holds: the file a spec reference names (a path, or a registered name), its
text and its YAML document, each bounded (see draftsmith.specs.loader, which checks the document as a spec).
"""
from __future__ import annotations

import difflib
import itertools
import os
from pathlib import Path
from typing import Any

import yaml

from draftsmith import limits
from draftsmith.errors import NotFound, OptionError, Problem, SpecError, short_text
from draftsmith.registry import Registry
from draftsmith.registry.registry import NO_AUTOLOAD, UnknownSpec
from draftsmith.specs.schema import Spec
from draftsmith.specs.yaml_errors import short_yaml_error, yaml_hint
from draftsmith.specs.yaml_loader import MergeBound, SpecLoader, repeated_keys
from draftsmith.yaml_places import SAFE_LOADER


class SpecNotFound(NotFound):
    """A spec file that does not exist or is not a regular file."""


def spec_path(ref: str | Path, registry: Registry) -> Path:
    """A ``.yaml`` / ``.yml`` path as given; else the file of a registered spec of that name; else an existing file.
    (A registered name wins over a folder or file of the same name in the working directory; written as a path,
    ``./NAME`` or with any folder in it, it is the file, and one that does not exist is said as a file.) A link
    that leads nowhere is a file's problem, not an unknown name."""
    if (p := spec_file(ref)) is not None:
        return p
    p = Path(ref)
    if not registry.has_spec(str(ref)) and p.is_symlink():   # a link that leads nowhere: a file's problem
        return _regular(p)
    if registry.has_spec(str(ref)) or not p.exists():   # a clashing name: spec_source says so
        try:
            return registered_file(str(ref), registry)
        except UnknownSpec as e:
            if near := near_file(p, "\nnote:"):   # 'mine.yam' beside mine.yaml
                raise UnknownSpec(f"{e}{near}") from None
            raise
    if not p.is_file():   # a folder or a device: say so, not "no such file"
        raise SpecNotFound(f"spec file {short_text(p, 300)} is not a regular file (a spec is one YAML file)")
    return p


def spec_file(ref: str | Path) -> Path | None:
    """The file a spec reference written as one names (a ``.yaml`` / ``.yml`` name, or a path with a folder in it:
    ``./NAME``), checked without the registry, whose plugins and components import torch (seconds), so that a
    mistyped path is said at once; None for a bare name (the registry's to find). An empty string is refused:
    Path("") is the current folder, which would be reported as a spec file that is not a regular file."""
    if isinstance(ref, str) and not ref:
        raise OptionError("the spec is an empty string: give a spec name (`draftsmith list` shows them) or the path "
                          "of a spec's YAML file")
    p = Path(ref)
    as_path = any(sep in str(ref) for sep in {"/", os.sep})
    if p.suffix in (".yaml", ".yml") or as_path and p.is_symlink():
        return _regular(p)
    if not as_path:
        return None
    if not p.exists():   # ./name or a/b: a path, which no spec's name is
        raise SpecNotFound(f"spec file {short_text(p, 300)} does not exist{near_file(p, '.')}")
    if not p.is_file():
        raise SpecNotFound(f"spec file {short_text(p, 300)} is not a regular file (a spec is one YAML file)")
    return p


def _regular(p: Path) -> Path:
    """``p`` if it is a regular file (a link to one); else a SpecNotFound saying what it is."""
    if not p.is_file():   # a link that leads nowhere is a file's problem, not an unknown name
        raise SpecNotFound(f"spec file {short_text(p, 300)} {no_file(p)}")
    return p


def no_file(p: Path) -> str:
    """What ``p``, no regular file, is: 'is not a regular file', 'is a link that leads nowhere ...', or 'does not
    exist' with the near file's name."""
    return ("is not a regular file" if p.exists() else
            "is a link that leads nowhere (to itself, or to no file)" if p.is_symlink() else
            f"does not exist{near_file(p, '.')}")


WITHOUT_PLUGINS = f"meanwhile {NO_AUTOLOAD}=1 runs draftsmith without installed plugins"


def without_plugin(name: str, registry: Registry) -> str:
    """How to go on without the plugin that registered spec ``name``: its own way out where it is installed (fix or
    uninstall it, or DRAFTSMITH_DISABLE_PLUGINS=NAME), else without every installed plugin."""
    way_out = registry.way_outs.get(registry.specs[name].plugin)
    return f"meanwhile {way_out}" if way_out else WITHOUT_PLUGINS


def near_file(p: Path, lead: str = "") -> str:
    """``lead`` + ' Did you mean the file 'F'?' for the YAML file in ``p``'s folder whose name is closest to
    ``p``'s (a typo'd suffix or letter), or '' (none close, a folder that does not list; the first SCAN entries
    only)."""
    try:
        with os.scandir(p.parent) as entries:
            names = [e.name for e in itertools.islice(entries, SCAN) if e.name.endswith((".yaml", ".yml"))]
    except (OSError, ValueError):
        return ""
    # a bare name is compared as its file would be named ('mine' beside mine.yaml)
    close = difflib.get_close_matches(p.name if p.suffix in (".yaml", ".yml") else p.name + ".yaml", names, n=1,
                                      cutoff=0.8)
    return f"{lead} Did you mean the file {short_text(str(p.parent / close[0]), 300)!r}?" if close else ""


SCAN = 1000   # folder entries near_file reads


def registered_file(name: str, registry: Registry) -> Path:
    """The file of the registered spec ``name``; one that is not a regular file (a plugin's package data missing)
    is a SpecNotFound naming who registered it and what to do."""
    path = registry.spec_source(name).path
    if not path.is_file():
        what = "is not a regular file" if path.exists() else "does not exist"
        raise SpecNotFound(f"spec {name!r} of {registry.spec_provider(name)} is the file {short_text(path, 300)}, "
                           f"which {what}; {provider_fix(name, registry)}")
    return path


def provider_fix(name: str, registry: Registry) -> str:
    """What to do about a registered spec whose file is missing or says another name: a plugin's is the plugin's
    to fix (reinstall it: its package data may be missing); a folder's file changed since the folder was read."""
    if registry.specs[name].folder:
        return "the file changed since its folder was read: run the command again"
    return ("reinstall the plugin (its package data may be missing), or have its draftsmith_specs hook return "
            f"the right file; {without_plugin(name, registry)}")


def read_text(path: Path) -> str:
    """A spec file's text, or a SpecError naming the file (not a regular file, its size, its encoding)."""
    source = str(path)
    if not path.is_file():  # a FIFO or a device would block or never end
        raise SpecNotFound(f"spec file {short_text(source, 300)} is not a regular file")
    size = path.stat().st_size
    if size <= limits.SPEC_BYTES:   # a size said before anything is read; what is read is bounded too (a file that
        with path.open("rb") as f:   # grew since, or one whose size the system does not say: /proc's say 0)
            data = f.read(limits.SPEC_BYTES + 1)
        if len(data) <= limits.SPEC_BYTES:
            return decode_text(data, source)
        size = f"more than {limits.SPEC_BYTES}"
    raise SpecError(source, [Problem("", f"the file is {size} bytes; a spec is at most {limits.SPEC_BYTES} bytes "
                                         "(draftsmith/limits.py)")])


def decode_text(data: bytes, source: str) -> str:
    if b"\0" in data:
        raise SpecError(source, [Problem("", f"the file is binary (a NUL byte at offset {data.index(0)}), "
                                             "not YAML text")])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SpecError(source, [Problem("", f"the file is not UTF-8 text: byte {data[e.start]:#04x} at offset "
                                             f"{e.start}")]) from None


def _too_deep(source: str, mark) -> SpecError:
    return SpecError(source, [Problem("", f"nesting deeper than {limits.YAML_DEPTH} levels (line {mark.line + 1})")])


def load_yaml_text(text: str, source: str = "<spec>") -> Any:
    """One YAML document as plain data, bounded in depth before it is composed (libyaml recurses in C)."""
    try:
        open_: list[int] = []   # per open collection: -1 a sequence, 0 / 1 a mapping whose next node is a key / value
        values = 0              # nodes that are not keys, as check_plain_data counts them (an alias once)
        for event in yaml.parse(text, Loader=SAFE_LOADER):
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                open_.pop()
            elif isinstance(event, yaml.NodeEvent):
                if not open_ or open_[-1] != 0:
                    values += 1
                    if values > limits.YAML_NODES:   # before a node is built (32k scalars took 0.3 s to build)
                        raise SpecError(source, [Problem("", f"more than {limits.YAML_NODES} values by line "
                                                             f"{event.start_mark.line + 1} (a spec has about 50)")])
                if open_ and open_[-1] >= 0:
                    open_[-1] ^= 1
                if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                    open_.append(0 if isinstance(event, yaml.MappingStartEvent) else -1)
                    if len(open_) > limits.YAML_DEPTH:
                        raise _too_deep(source, event.start_mark)
        loader = SpecLoader(text)   # a safe loader
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
        if loader.repeats:
            raise RepeatedKeys(source, [Problem(path, f"the key appears twice in one mapping (first at line {first}); "
                                                      "YAML would keep the last", hint="Remove one of them", line=line)
                                        for path, line, first in repeated_keys(loader)], data)
        return data
    except MergeBound as e:
        raise SpecError(source, [Problem("", str(e))]) from None
    except yaml.YAMLError as e:
        # PyYAML >= 6.0.4 stops at its own nesting bound (1000 levels, far past ours) while its scanner looks ahead,
        # before our count sees the 33rd level: the same refusal, said as ours
        if "nesting depth" in str(getattr(e, "problem", "")) and getattr(e, "problem_mark", None) is not None:
            raise _too_deep(source, e.problem_mark) from None
        raise SpecError(source, [Problem("", f"not valid YAML: {short_yaml_error(e)}",
                                         hint=yaml_hint(e, text))]) from None
    except RecursionError:  # pragma: no cover (the depth checks, of nesting and of merges, come first)
        raise SpecError(source, [Problem("", "nesting too deep")]) from None


class RepeatedKeys(SpecError):
    """Keys repeated in one mapping, every one; ``data``: the document read with the last of each, which
    :func:`load_spec` still checks, so that its other problems are said in the same run."""

    def __init__(self, source: str, problems: list[Problem], data: Any):
        super().__init__(source, problems)
        self.data = data


# keys a model's config.json (or a Mistral params.json) holds and no spec does
MODEL_CONFIG_KEYS = ("model_type", "architectures", "hidden_size", "num_hidden_layers", "vocab_size", "dim",
                     "n_layers")


def model_config(document: Any) -> str | None:
    """'a model's config (model_type, hidden_size, ...), not a spec' for a mapping holding none of a spec's fields
    and some model config keys (a checkpoint's config.json given as a spec or a base: every key was an unknown
    field, 26 problems), else None."""
    if not isinstance(document, dict) or any(k in document for k in Spec.model_fields):
        return None
    held = [k for k in MODEL_CONFIG_KEYS if k in document]
    return f"a model's config ({', '.join(held[:4])}, ...), not a spec" if held else None


MODEL_CONFIG_FIX = ("A spec is a YAML file with name and draft (`draftsmith inspect FOLDER` writes one for a draft "
                    "folder); a checkpoint folder is named in the spec's checkpoints.target / checkpoints.draft")
