"""Where a spec's problems are in its YAML text (errors.with_places), aliases included: the line a user edits to fix
each.

A problem's dotted path names a value of the data as loaded, where an alias (``b: *a``) is the anchored node itself,
and a merge (``<<: *a``) lends a mapping the anchor's keys. The text is read as written instead, from the event
stream (nothing is composed, nothing recurses): every path gets the place of its own key (of its item, in a list),
and a path that goes through an alias gets the alias's place, where it is used, with a note naming the alias and the
line the anchored value is at (``via alias *a defined at line 3; the value is at line 5``): one edit there changes
every use, so the user is told both. A path through no alias gets its deepest written part, as before: an unknown
key's own line, a missing key's parent's, the document's first line at worst.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import yaml

# the safe loader every YAML read of draftsmith's builds on (libyaml when present: 10x faster on the same input)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Place = tuple[int, int]   # 1-based (line, column)
MERGE, STR = "tag:yaml.org,2002:merge", "tag:yaml.org,2002:str"   # the tags of a '<<' key and of a string


@dataclass(frozen=True)
class Alias:
    name: str            # the anchor it names, without '*'
    anchor: str | None   # the dotted path of the anchored node (None: under a key that is no path)
    anchor_at: Place     # where the anchor (&name) is


@dataclass
class Places:
    where: dict[str, Place] = field(default_factory=dict)     # every written path -> its key's (item's) place
    aliases: dict[str, Alias] = field(default_factory=dict)   # a path whose value is an alias -> that alias
    merges: dict[str, list[str]] = field(default_factory=dict)   # a mapping -> its '<<' aliases' paths, in order

    def place(self, path: str, top: bool = True) -> tuple[Place | None, str]:
        """Where to fix the value at dotted ``path``, and a note when the path goes through an alias ('' if not);
        (None, '') for text that did not parse, and, unless ``top``, for a path no part of which is written (a
        checkpoint config's key is no place in the spec; a spec's own missing field is the document's)."""
        parts, at, i = (path.split(".") if path else []), "", 0
        here, first, via = self.where.get(""), None, None
        for _ in range(len(parts) + len(self.aliases) + 1):   # each hop consumes a part or goes to another alias
            while i < len(parts) and at not in self.aliases:
                child = f"{at}.{parts[i]}" if at else parts[i]
                if child in self.where:
                    i += 1
                elif (child := self._merged(at, parts[i])) is None:   # the next part from a '<<'
                    break
                at, here = child, self.where[child]
            if at not in self.aliases:
                break
            alias = self.aliases[at]
            if via is None:   # the first alias on the path: where it is used is where the user reads the path
                first, via = here, alias
            if alias.anchor is None or alias.anchor not in self.where:
                here = None
                break
            at, here = alias.anchor, self.where[alias.anchor]
        if via is None:
            return (here, "") if top or at else (None, "")
        value = f"; the value is at line {here[0]}" if here is not None and here[0] != via.anchor_at[0] else ""
        return first, f"via alias *{via.name} defined at line {via.anchor_at[0]}{value}"

    def _source(self, path: str) -> str | None:
        """The path of the mapping a merge at ``path`` reads: an alias's anchor, or the inline mapping itself."""
        return self.aliases[path].anchor if path in self.aliases else path

    def _merged(self, at: str, key: str) -> str | None:
        """The path of the first '<<' alias of mapping ``at`` whose anchored mapping has ``key``, itself or through
        its own merges (merged first wins, as in YAML); None if none has it. Each anchor is searched once, without
        recursing: a chain of mappings that each merge the one before, twice, is linear in its length."""
        seen: set[str] = set()
        for path in self.merges.get(at, ()):
            todo = [self._source(path)]
            while todo:
                anchor = todo.pop()
                if anchor is None or anchor in seen:
                    continue
                seen.add(anchor)
                if f"{anchor}.{key}" in self.where:
                    return path
                todo += [self._source(p) for p in self.merges.get(anchor, ())]
        return None


@dataclass
class _Open:
    path: str | None          # None: inside a key that is itself a collection (it names no path)
    mapping: bool
    merge_of: str | None = None   # a '<<: [*a, *b]' list: the mapping it merges into
    key: str | None = None
    key_at: Place = (0, 0)
    merge_key: bool = False   # the key is a plain '<<' or tagged !!merge (a quoted '<<' is a string)
    is_key: bool = True       # a mapping's next node is a key
    index: int = 0
    merges: int = 0           # the '<<' keys of a mapping so far (each gets a path of its own)


def yaml_places(text: str) -> Places:
    """The :class:`Places` of a YAML document; empty for text that does not parse."""
    out, open_, anchors = Places(), [], {}
    try:
        for event in yaml.parse(text, Loader=SAFE_LOADER):
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                open_.pop()
            elif isinstance(event, yaml.NodeEvent):
                _node(event, open_, anchors, out)
            elif isinstance(event, yaml.DocumentEndEvent):
                break
    except yaml.YAMLError:
        return Places()
    return out


def _node(event: yaml.NodeEvent, open_: list[_Open], anchors: dict[str, tuple[str | None, Place]],
          out: Places) -> None:
    """One node of the stream: a key remembered, or a value with its path, place, anchor or alias recorded."""
    mark = (event.start_mark.line + 1, event.start_mark.column + 1)
    parent = open_[-1] if open_ else None
    merge_into = None
    if parent is None:
        path, at = "", mark
    elif parent.mapping and parent.is_key:
        scalar = isinstance(event, yaml.ScalarEvent)
        parent.key = event.value if scalar and parent.path is not None else None
        parent.merge_key = scalar and (event.tag == MERGE or event.value == "<<" and event.implicit[0])
        parent.key_at, parent.is_key = mark, False
        if isinstance(event, yaml.CollectionStartEvent):
            open_.append(_Open(None, isinstance(event, yaml.MappingStartEvent)))
        return
    elif parent.mapping:
        parent.is_key = True
        key, merge_at = parent.key, 0   # a second '<<' key (the loader refuses it) searched before the first
        if parent.merge_key:
            parent.merges += 1
            key = f"\0<<{parent.merges}"   # a NUL: no field of any spec is named so
        path = None if parent.path is None or key is None else _join(parent.path, key)
        at = parent.key_at
        merge_into = parent.path if parent.merge_key else None
    else:   # in '<<: [*a, *b]' an earlier mapping overrides a later one: searched in list order
        path = None if parent.path is None else _join(parent.path, str(parent.index))
        at, merge_into, merge_at = mark, parent.merge_of, parent.index
        parent.index += 1
    if path is not None:
        out.where.setdefault(path, at)
    if isinstance(event, yaml.AliasEvent):
        if path is not None:
            anchor, anchor_at = anchors.get(event.anchor, (None, mark))
            out.aliases[path] = Alias(event.anchor, anchor, anchor_at)
            if merge_into is not None:
                out.merges.setdefault(merge_into, []).insert(merge_at, path)
        return
    if event.anchor:
        anchors[event.anchor] = (path, mark)
    if isinstance(event, yaml.CollectionStartEvent):
        mapping = isinstance(event, yaml.MappingStartEvent)
        if mapping and merge_into is not None and path is not None:   # an inline mapping merged: its own keys
            out.merges.setdefault(merge_into, []).insert(merge_at, path)
        open_.append(_Open(path, mapping, merge_of=merge_into if not mapping else None))


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part
