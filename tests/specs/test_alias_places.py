"""A problem reached through a YAML alias (``b: *a``) is placed where the user reads its path: at the alias, saying
``via alias *a defined at line N`` (and the line of the value inside the anchor, where it is another); a problem under
the anchor itself at its own key, not at the anchor's. Merges (``<<: *a``) likewise, at their ``<<``."""
import pytest

import draftsmith
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.yaml_places import yaml_places

LLAMA = (BUILTIN_DIR / "eagle3-llama.yaml").read_text()
BLOCK = "  attention: &att\n    kind: gqa\n    rope: neox\n    bogus: 1\n"


def edited(**changes: str) -> str:
    text = LLAMA.replace("name: eagle3-llama", "name: aliased", 1)
    for old, new in changes.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def problems(tmp_path, text: str) -> dict:
    path = tmp_path / "aliased.yaml"
    path.write_text(text)
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec(path, registry=draftsmith.build_registry(entry_points=False))
    return {p.path: p for p in info.value.problems}


def test_a_problem_through_an_alias_is_at_the_alias_and_one_under_the_anchor_at_its_key(tmp_path):
    text = edited(**{"  attention: {kind: gqa, rope: neox}\n": BLOCK,
                     "  feed_back: pre_norm\n": "  feed_back: pre_norm\n  mlp: *att\n"})
    found = problems(tmp_path, text)
    anchor, kind = line_of(text, "attention: &att"), line_of(text, "kind: gqa")
    assert found["draft.attention.bogus"].line == line_of(text, "bogus: 1")      # not the anchor's key (line 6)
    through = found["draft.mlp.kind"]
    assert through.line == line_of(text, "mlp: *att")                            # not the anchor's kind: (line 7)
    assert through.message == f"unknown mlp 'gqa' (via alias *att defined at line {anchor}; the value is at line " \
                              f"{kind})"
    assert through.render().splitlines()[0].endswith(f"the value is at line {kind}) (line {through.line})")


def test_an_aliased_list_item_is_at_the_alias(tmp_path):
    text = edited(**{"    - {match: '^midlayer\\.', replace: 'layers.0.'}\n":
                     "    - &rule {match: '^midlayer\\.', replace: 'layers.0.', extra: 1}\n    - *rule\n"})
    found = problems(tmp_path, text)
    assert found["weights.rules.0.extra"].line == line_of(text, "&rule")
    assert "via alias" not in found["weights.rules.0.extra"].message
    assert found["weights.rules.1.extra"].line == line_of(text, "- *rule")       # the item, not its anchor
    assert found["weights.rules.1.extra"].message.endswith(f"(via alias *rule defined at line "
                                                           f"{line_of(text, '&rule')})")


def test_an_aliased_scalar_says_its_alias(tmp_path):
    text = edited(**{"description: >-": "description: &k gqa\nabout: >-",
                     "  layer: {kind: llama}": "  layer: {kind: *k}"})
    found = problems(tmp_path, text)
    assert found["draft.layer.kind"].line == line_of(text, "layer: {kind: *k}")
    assert "(via alias *k defined at line 2)" in found["draft.layer.kind"].message


def test_a_merged_key_is_at_the_merge(tmp_path):
    text = edited(**{"  attention: {kind: gqa, rope: neox}\n": BLOCK.replace("    bogus: 1\n", ""),
                     "  feed_back: pre_norm\n": "  feed_back: pre_norm\n  mlp:\n    <<: *att\n    kind: swiglu\n"})
    found = problems(tmp_path, text)
    assert found["draft.mlp.rope"].line == line_of(text, "<<: *att")
    assert found["draft.mlp.rope"].message.endswith(f"(via alias *att defined at line "
                                                    f"{line_of(text, '&att')}; the value is at line "
                                                    f"{line_of(text, 'rope: neox')})")
    assert "draft.mlp.kind" not in found   # its own key, valid


def test_places_of_a_text_with_anchors_aliases_and_merges():
    places = yaml_places("a: &x\n  k: 1\n  j: 2\n"      # 1-3
                         "b: *x\n"                      # 4
                         "c:\n  - &y {m: 1}\n  - *y\n"  # 5-7
                         "e: {<<: *x, j: 3}\n"          # 8
                         "f:\n  <<: [*y, *x]\n")        # 9-10
    note = "via alias *x defined at line 1"
    assert places.place("a.k") == ((2, 3), "")
    assert places.place("b.k") == ((4, 1), f"{note}; the value is at line 2")
    assert places.place("b.missing") == ((4, 1), note)
    assert places.place("c.1.m") == ((7, 5), "via alias *y defined at line 6")
    assert places.place("e.k") == ((8, 5), f"{note}; the value is at line 2")
    assert places.place("e.j") == ((8, 13), "")                                  # its own key wins over the merge
    assert places.place("f.m") == ((10, 8), "via alias *y defined at line 6")  # the first merged mapping with it
    assert places.place("f.k") == ((10, 12), f"{note}; the value is at line 2")
    assert places.place("nowhere") == ((1, 1), "")
    assert places.place("nowhere.x", top=False) == (None, "")   # no part written: no place in the spec
    assert places.place("a.nowhere", top=False) == ((1, 1), "")
    assert yaml_places("a: [\n").place("a") == (None, "")


def test_a_recursive_alias_is_placed_and_ends(tmp_path):
    places = yaml_places("a: &a\n  b: *a\n")
    assert places.place("a.b.b.b") == ((2, 3), "via alias *a defined at line 1")
    path = tmp_path / "loop.yaml"
    path.write_text("name: loop\ndraft: &d\n  fusion: *d\n")
    with pytest.raises(draftsmith.SpecError, match=r"contains itself .*\(line 3\)"):
        draftsmith.load_spec(path)


class _Counting(dict):
    def __init__(self, *a):
        super().__init__(*a)
        self.asked = 0

    def __contains__(self, key):
        self.asked += 1
        return super().__contains__(key)


def test_a_chain_of_merges_is_searched_once_per_anchor_without_recursing():
    """m_i merges m_(i-1) twice: each anchor is searched once (a path-local search visits 2^links); a chain of
    3000 single merges is searched without recursing (Python's limit is 1000 frames)."""
    doubled = "m0: &m0 {a: 1}\n" + "".join(f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}]}}\n" for i in range(1, 21))
    places = yaml_places(doubled)
    places.where = _Counting(places.where)
    assert places.place("m20.missing") == ((21, 1), "")
    assert places.where.asked < 100
    assert places.place("m20.a") == ((21, 17), "via alias *m19 defined at line 20; the value is at line 1")
    chain = "m0: &m0 {a: 1}\n" + "".join(f"m{i}: &m{i} {{<<: *m{i - 1}}}\n" for i in range(1, 3000))
    assert yaml_places(chain).place("m2999.b") == ((3000, 1), "")
    assert yaml_places(chain).place("m2999.a")[1] == "via alias *m2998 defined at line 2999; the value is at line 1"


def test_a_chain_of_doubled_merges_loads_in_linear_size():
    """The loader keeps one pair per merged key (the one the dict keeps): m_i merging m_(i-1) twice holds one
    pair, where PyYAML's flattening holds 2^i; the data is PyYAML's."""
    import yaml

    from draftsmith.specs.documents import load_yaml_text
    from draftsmith.specs.yaml_loader import SpecLoader

    text = "m0: &m0 {a: 1}\n" + "".join(f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], b: {i}}}\n" for i in range(1, 17))
    loader = SpecLoader(text)
    try:
        root = loader.get_single_node()
        last = root.value[-1][1]
        loader.flatten_mapping(last)
        assert len(last.value) == 2
    finally:
        loader.dispose()
    assert load_yaml_text(text) == yaml.safe_load(text)
    assert load_yaml_text("a: &a {x: 1}\nb: &b {<<: *a, x: 5}\nc: {<<: [*b, *a], y: 2}\n") == {
        "a": {"x": 1}, "b": {"x": 5}, "c": {"x": 5, "y": 2}}


@pytest.mark.parametrize("text", [
    "outer:\n  inner: &a\n    x: 1\n    x: 2\nb:\n  <<: *a\n",   # the deeper anchor is flattened first, by b's merge
    "b:\n  <<: &a {x: 1, x: 2}\nc: *a\n"])                       # anchored inside the merge itself
def test_a_repeated_key_in_a_merged_mapping_is_refused_whichever_is_built_first(text):
    from draftsmith.errors import SpecError
    from draftsmith.specs.documents import load_yaml_text

    with pytest.raises(SpecError, match=r"x: the key appears twice in one mapping \(first at line "):
        load_yaml_text(text)


def test_an_anchor_overriding_a_key_it_merges_is_no_repeat():
    from draftsmith.specs.documents import load_yaml_text

    text = "outer:\n  inner: &a\n    <<: {x: 0}\n    x: 1\nb:\n  <<: *a\n"
    assert load_yaml_text(text) == {"outer": {"inner": {"x": 1}}, "b": {"x": 1}}


def test_a_chain_of_doubled_merges_of_a_collection_key_stays_linear():
    """A key that is a list is one node however often merges copy it: kept once, so the chain does not double
    (it is refused as an unhashable key, as PyYAML refuses it, in no time)."""
    from draftsmith.specs.yaml_loader import SpecLoader

    text = "a0: &a0 {[1]: 1}\n" + "".join(f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}\n" for i in range(1, 17))
    loader = SpecLoader(text)
    try:
        last = loader.get_single_node().value[-1][1]
        loader.flatten_mapping(last)
        assert len(last.value) == 1
    finally:
        loader.dispose()


def test_a_merge_list_is_placed_as_yaml_merges_it_and_a_second_merge_key_is_refused():
    """In '<<: [*b, *c]' an earlier mapping overrides a later one (each key placed at the merge it comes from); two
    '<<' keys in one mapping are refused when loaded (PyYAML 6.0.3 lets the later one win, 6.0.4 the earlier)."""
    from draftsmith.errors import SpecError
    from draftsmith.specs.documents import load_yaml_text

    text = "a: &a {x: 1, y: 0}\nb: &b {y: 2}\nc: &c {y: 3, z: 1}\nm:\n  <<: [*b, *c, *a]\n"
    assert load_yaml_text(text)["m"] == {"x": 1, "y": 2, "z": 1}
    places = yaml_places(text)
    assert places.place("m.x") == ((5, 16), "via alias *a defined at line 1")
    assert places.place("m.y") == ((5, 8), "via alias *b defined at line 2")
    assert places.place("m.z") == ((5, 12), "via alias *c defined at line 3")
    with pytest.raises(SpecError, match=r"line 6, column 3: .*found a second '<<' merge key \(the first at line 5\)"):
        load_yaml_text("a: &a {x: 1}\nb: &b {y: 2}\nc: 1\nm:\n  <<: *a\n  <<: *b\n")


def test_an_inline_mapping_merged_is_placed_at_its_own_keys():
    """'<<: [{x: bad}, *a]': x comes from the inline mapping (earlier wins), placed at its key with no alias note;
    '<<: {x: bad}' likewise; an alias inside an inline merge still says so."""
    places = yaml_places("a: &a {x: 1}\nm:\n  <<: [{x: bad}, *a]\n")
    assert places.place("m.x") == ((3, 9), "")
    assert yaml_places("m:\n  <<: {x: bad}\n  y: 1\n").place("m.x") == ((2, 8), "")
    assert yaml_places("a: &a {z: 1}\nm:\n  <<: [{x: 2, <<: *a}]\n").place("m.z") == (
        (3, 15), "via alias *a defined at line 1")


@pytest.mark.parametrize("text", [
    "b:\n  <<: {a: {x: 1, x: 2}}\n  a: 3\n",                     # overridden by an own key: never built
    "b:\n  <<: [{a: 0}, {a: [{x: 1, x: 2}]}]\n",                 # overridden by an earlier merge, in a list
    "b:\n  <<: {a: &s {c: *s, x: 1, x: 2}}\n  a: 3\n"])         # an overridden value holding an alias to itself
def test_a_repeated_key_in_an_overridden_merged_value_is_refused(text):
    from draftsmith.errors import SpecError
    from draftsmith.specs.documents import load_yaml_text

    with pytest.raises(SpecError, match=r"x: the key appears twice in one mapping \(first at line "):
        load_yaml_text(text)


def test_a_merge_key_tagged_merge_is_placed_as_a_merge_and_no_real_key_is_taken_for_one():
    from draftsmith.specs.documents import load_yaml_text

    for key in ("!!merge <<", "!!merge other"):
        text = f"a: &a {{x: 1}}\nm:\n  {key}: *a\n"
        assert load_yaml_text(text)["m"] == {"x": 1}
        assert yaml_places(text).place("m.x") == ((3, 3), "via alias *a defined at line 1")
    places = yaml_places("a: &a {x: 1}\nm:\n  <<: *a\n  '<<1': {y: 2}\n")
    assert places.place("m.<<1.y") == ((4, 11), "")   # a key written '<<1' is its own, not the merge's
    assert places.place("m.x") == ((3, 3), "via alias *a defined at line 1")
