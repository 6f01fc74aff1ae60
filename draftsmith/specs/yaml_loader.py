"""The YAML loader of spec files: safe constructors only, no repeated key in a mapping, and YAML's merge keys
(``<<``) written here rather than taken from PyYAML, bounded like the rest of a spec (draftsmith/limits.py).

Merges follow YAML's merge type: a mapping's own keys override merged ones, and in ``<<: [*a, *b]`` an earlier
mapping's keys override a later one's. PyYAML's own flattening is not used: 6.0.3 copies every repeat (a chain of
mappings each merging the one before twice doubled the pairs at each link: 23 links of a 600-byte file took 4 s)
and 6.0.4 lets a later mapping win, so a spec's data would depend on the version. Here each key is kept once (a
collection key by its node, which every copy shares), a mapping merged twice in one list counts once, the pairs
merges add are counted against ``YAML_NODES`` and merge chains against ``YAML_DEPTH``, and a mapping that merges
itself is refused, each before the pairs are built."""
from __future__ import annotations

import re
from typing import Any

import yaml

from draftsmith import limits
from draftsmith.errors import short
from draftsmith.yaml_places import MERGE, SAFE_LOADER, STR

VALUE = "tag:yaml.org,2002:value"
BASE_60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")   # YAML 1.1's sexagesimal int and float


class MergeBound(yaml.YAMLError):
    """Merges that would make a spec larger or deeper than its bounds, or a mapping that merges itself."""


class SpecLoader(SAFE_LOADER):
    """Safe constructors only, and a repeated key in one mapping is an error (YAML would keep the last): each one
    is recorded in ``repeats`` (the last value kept, so the rest of the document can still be checked) and said by
    :func:`repeated_keys`."""

    def __init__(self, stream):
        super().__init__(stream)
        self._checked: set[int] = set()      # the mappings whose own keys were checked for repeats
        self._flattening: list[int] = []     # the merges being flattened, outermost first
        self._merged_pairs = 0               # the pairs merges added, all mappings together
        self.repeats: list[tuple[Any, Any, Any]] = []   # (mapping, key node, first key node) of each repeated key
        self.root = None                     # the document's node, once composed

    def construct_document(self, node):
        self.root = node
        return super().construct_document(node)

    def flatten_mapping(self, node):
        """``node``'s pairs with its merges in (see the module): its own keys' repeats checked first, once (a merge
        may flatten a mapping before it is built)."""
        if id(node) not in self._checked:
            self._checked.add(id(node))
            self._no_repeats(node)
        if not any(k.tag == MERGE for k, _ in node.value):
            return
        if id(node) in self._flattening:
            raise MergeBound(f"a mapping merges itself (line {node.start_mark.line + 1}), directly or through "
                             "the mappings it merges")
        if len(self._flattening) >= limits.YAML_DEPTH:
            raise MergeBound(f"merges chained deeper than {limits.YAML_DEPTH} levels (line "
                             f"{node.start_mark.line + 1})")
        self._flattening.append(id(node))
        try:
            sources = self._sources(node)
        finally:
            self._flattening.pop()
        own = [(k, v) for k, v in node.value if k.tag != MERGE]
        # later sources first, then earlier ones, then the mapping's own pairs: the last of a key wins
        pairs = [pair for source in reversed(sources) for pair in source.value] + own
        last = {_key_identity(k): i for i, (k, _) in enumerate(pairs)}
        node.value = [(k, v) for i, (k, v) in enumerate(pairs) if last[_key_identity(k)] == i]
        self._no_repeats_below(v for i, (k, v) in enumerate(pairs) if last[_key_identity(k)] != i)
        self._merged_pairs += len(node.value) - len(own)
        if self._merged_pairs > limits.YAML_NODES:
            raise MergeBound(f"more than {limits.YAML_NODES} values with merges expanded, by line "
                             f"{node.start_mark.line + 1} (a spec has about 50)")

    def _sources(self, node) -> list[yaml.MappingNode]:
        """The mappings ``node``'s merge key names, in order, each once (an earlier copy wins anyway), flattened."""
        out, seen = [], set()
        for key_node, value_node in node.value:
            if key_node.tag != MERGE:
                continue
            for source in value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]:
                if not isinstance(source, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"expected a mapping or a list of mappings to merge, but found a {source.id}",
                        source.start_mark)
                if id(source) not in seen:
                    seen.add(id(source))
                    self.flatten_mapping(source)
                    out.append(source)
        return out

    def _no_repeats_below(self, nodes):
        """Repeated keys in the values a merge overrides, which are never built but are text the user wrote; each
        node once, iteratively (an overridden value may hold aliases, even to itself)."""
        todo, seen = list(nodes), set()
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                if id(node) not in self._checked:
                    self._checked.add(id(node))
                    self._no_repeats(node)
                todo += [n for pair in node.value for n in pair]
            elif isinstance(node, yaml.SequenceNode):
                todo += node.value

    def _no_repeats(self, node):
        seen: dict[Any, Any] = {}
        merge = None
        for key_node, _ in node.value:
            if key_node.tag == MERGE:   # '<<' merges may override keys on purpose, but once: which of two wins
                if merge is not None:   # differs between PyYAML versions
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark, f"found a second '<<' merge key (the first "
                        f"at line {merge.start_mark.line + 1}); merge several mappings with one: <<: [*a, *b]",
                        key_node.start_mark)
                merge = key_node
                continue
            if key_node.tag == VALUE:   # '=' is read as a string key, as PyYAML reads it
                key_node.tag = STR
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if first is not key_node:   # every one is said (repeated_keys), the last value kept meanwhile
                self.repeats.append((node, key_node, first))

    def resolve(self, kind, value, implicit):
        """PyYAML's YAML 1.1 tags, except a plain scalar of base-60 digits (``1:05``, ``1:30.5``), which YAML 1.1
        reads as a number (65, 90.5) and YAML 1.2 as the text it is: a string here, which a field that wants a
        number says as what was written (it was "65 is not allowed")."""
        if kind is yaml.ScalarNode and implicit[0] and ":" in value and BASE_60.fullmatch(value):
            return STR
        return super().resolve(kind, value, implicit)

    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:   # decimal past Python's 4300-digit parsing limit (hex, octal and binary have none)
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {len(node.value)} characters; a spec's numbers have at most "
                            f"{limits.INT_DIGITS} digits", node.start_mark) from None


SpecLoader.add_constructor("tag:yaml.org,2002:int", SpecLoader.construct_yaml_int)


def _key_identity(node) -> Any:
    return (node.tag, node.value) if isinstance(node, yaml.ScalarNode) else id(node)


def repeated_keys(loader: SpecLoader) -> list[tuple[str, int, int]]:
    """(dotted path, line, first line) of each key ``loader`` found repeated in one mapping, in file order."""
    paths: dict[int, str] = {}
    todo, seen = [(loader.root, "")], set()
    while todo:   # iteratively, each node once (aliases may share or contain nodes), in file order: a node an
        node, path = todo.pop()   # alias shares is named where its anchor writes it (YAML anchors before aliases)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        paths[id(node)] = path
        if isinstance(node, yaml.MappingNode):
            todo += reversed([(v, f"{path}.{k.value}" if path else str(k.value)) for k, v in node.value
                              if isinstance(k, yaml.ScalarNode)])
        elif isinstance(node, yaml.SequenceNode):
            todo += reversed([(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(node.value)])
    out = []
    for mapping, key, first in loader.repeats:
        where = paths.get(id(mapping), "")
        name = key.value if isinstance(key, yaml.ScalarNode) else short(key.value)
        out.append((f"{where}.{name}" if where else str(name), key.start_mark.line + 1, first.start_mark.line + 1))
    return sorted(out, key=lambda r: r[1])
