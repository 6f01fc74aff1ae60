"""Mutation survivors of the spec YAML loader (specs/yaml_loader.py), the YAML line map (yaml_places.py) and the
hook contract (hooks/kinds.py, records.py): the pairs merges add counted against YAML_NODES exactly (own keys not
counted, the bound itself allowed), the line a duplicate key's first copy is said to be at, a key written as an
alias (``*k : 1``) naming no path of its own nor taking another key's line, a quant factory's None accepted where a
norm's is refused, and the records plugins return (and the kinds' contract) read-only values."""
import pytest

from draftsmith import limits
from draftsmith.errors import SpecError
from draftsmith.specs.documents import load_yaml_text


# --- specs/yaml_loader.py -------------------------------------------------------------------------------------------

def merged_list(copies: int) -> str:
    """An anchor of 10 keys merged by ``copies`` mappings that each have one key of their own: 10 merged pairs
    each (the own key is no merged pair)."""
    keys = "{" + ", ".join(f"k{i}: {i}" for i in range(10)) + "}"
    return f"a: &a {keys}\nl: [" + ", ".join(["{<<: *a, own: 1}"] * copies) + "]\n"


def test_the_pairs_merges_add_are_bounded_exactly_and_own_keys_are_not_counted(monkeypatch):
    # catches yaml_loader.py:35 `_merged_pairs = 0` -> 1, :62 `len(node.value) - len(own)` -> `+`, :63
    # `_merged_pairs > YAML_NODES` -> `>=` (10 mappings each merging 10 pairs add 100: a bound of 100 allows them,
    # 99 refuses them; the document's own values, about 40, stay under both)
    monkeypatch.setattr(limits, "YAML_NODES", 100)
    data = load_yaml_text(merged_list(10))
    assert len(data["l"]) == 10 and all(m == data["a"] | {"own": 1} for m in data["l"])
    monkeypatch.setattr(limits, "YAML_NODES", 99)
    with pytest.raises(SpecError, match=r"more than 99 values with merges expanded, by line 2 "):
        load_yaml_text(merged_list(10))


def test_a_duplicate_key_says_the_line_of_its_first_copy():
    # catches yaml_loader.py:124 `first.start_mark.line + 1` -> `- 1`, `+ 2`, `+ 0` (the first copy is the one a
    # user may mean to keep; line 3 here, not the mapping's line 2 nor the document's line 1)
    with pytest.raises(SpecError) as info:
        load_yaml_text("a: 1\nb:\n  c: 2\n  d: 3\n  c: 4\n")
    (problem,) = info.value.problems
    assert (problem.path, problem.line) == ("b.c", 5)
    assert problem.message == "the key appears twice in one mapping (first at line 3); YAML would keep the last"


# --- yaml_places.py -------------------------------------------------------------------------------------------------

def test_a_key_written_as_an_alias_names_no_path_and_takes_no_other_keys_place(tmp_path):
    # catches yaml_places.py:126 `scalar and parent.path is not None` -> `or` (an alias key's event has no value: an
    # AttributeError while the SpecError is being made) and :138 `parent.path is None or key is None` -> `and` (the
    # alias key became the path 'draft.None' and a later key written 'None' was placed at the alias's line)
    import draftsmith
    from draftsmith.specs.catalog import BUILTIN_DIR

    text = (BUILTIN_DIR / "eagle3-llama.yaml").read_text().replace("name: eagle3-llama", "name: &k aliased", 1)
    text = text.replace("  feed_back: pre_norm\n", "  feed_back: pre_norm\n  *k : 1\n  None: 2\n", 1)
    path = tmp_path / "aliased.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(path, registry=draftsmith.build_registry(entry_points=False))
    found = {p.path: p for p in info.value.problems}
    assert set(found) == {"draft.aliased", "draft.None"}
    lines = text.splitlines()
    assert lines[found["draft.None"].line - 1] == "  None: 2" and found["draft.None"].column == 3


# --- hooks/kinds.py, hooks/records.py --------------------------------------------------------------------------------

def test_a_plugin_quant_that_works_in_place_may_return_none():
    # catches kinds.py:139 quant's `none_ok=True` -> False (a quant factory quantizes `module` in place: None is its
    # answer, where None from any other kind is refused; the backend case is test_plugin_mistakes')
    from torch import nn

    import draftsmith
    from draftsmith.hooks import Component, hookimpl
    from draftsmith.registry import ComponentFailed

    seen = []

    class Plugin:
        @hookimpl
        def draftsmith_components(self):
            return [Component("quant", "inplace", lambda params, *, module: seen.append(module)),
                    Component("norm", "nothing", lambda params, *, dim, eps: None)]

    reg = draftsmith.build_registry(plugins=[("inplace", Plugin())], entry_points=False)
    layer = nn.Linear(2, 2)
    assert reg.build("quant", "inplace", reg.get("quant", "inplace").params(), module=layer) is None
    assert seen == [layer]
    with pytest.raises(ComponentFailed, match=r"^norm 'nothing' \(plugin 'inplace'\): its factory returned None; "):
        reg.build("norm", "nothing", reg.get("norm", "nothing").params(), dim=4, eps=1e-6)


def test_the_records_plugins_return_and_the_kinds_contract_are_read_only_values():
    # catches records.py:27, :49, :57 and kinds.py:20, :27 `@dataclass(frozen=True)` -> frozen=False, records.py:24
    # NoParams `frozen=True` -> False. The registry hands out the very record a plugin returned, after checking it
    # when the plugin registered (params forbid unknown keys, doc is a string, the name is no spec word): a record
    # that could be changed afterwards, or a kind's contract loosened (KINDS is shared by every registry), would
    # skip those checks. Records compare and hash as values; so do the params a factory is given.
    import dataclasses
    from pathlib import Path

    import draftsmith
    from draftsmith.hooks import Component, LayoutMatch, SpecSource, hookimpl
    from draftsmith.hooks.kinds import KINDS
    from draftsmith.hooks.records import NoParams

    record = Component("norm", "plain", lambda params, *, dim, eps: None)

    class Plugin:
        @hookimpl
        def draftsmith_components(self):
            return [record]

    reg = draftsmith.build_registry(plugins=[("plain", Plugin())], entry_points=False)
    assert reg.get("norm", "plain") is record
    changes = [(record, "params", dict), (SpecSource("s", Path("s.yaml")), "path", Path("other.yaml")),
               (LayoutMatch("s", "why"), "plugin", "me"), (KINDS["norm"], "module", False),
               (KINDS["attention"].reserved["auto"], "choices", ())]
    for obj, name, value in changes:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, value)
        assert obj == dataclasses.replace(obj)
    assert len({record, dataclasses.replace(record), SpecSource("s", Path("s.yaml")), LayoutMatch("s", "why")}) == 3
    assert reg.get("norm", "plain").params is NoParams
    assert len({NoParams(), NoParams()}) == 1
