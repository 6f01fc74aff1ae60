"""A spec's document as a whole gives ONE SpecError naming the file: YAML that does not parse (its error cut past 400
characters), a document that is no mapping, a kind that looks like an import path (never imported), every problem of
both phases at once, the line of each problem in a file, graphs: on / off as words, a broken link or a missing file
said as one; any malformed spec ends in a SpecError and nothing else. Each field's own mistakes:
test_spec_errors.py."""
import sys

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import draftsmith
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.specs.loader import parse_spec

from test_spec_errors import only   # the one problem of a SpecError


def test_invalid_yaml(spec_error):
    err = spec_error("name: x\ndraft: {fusion: [unclosed\n")
    p = only(err)
    assert p.path == "" and "not valid YAML" in p.message and "line" in p.message


TAG_ERROR = "could not determine a constructor for the tag "


@pytest.mark.parametrize("extra", [0, 1])
def test_a_yaml_error_of_400_characters_is_shown_whole_and_a_longer_one_is_cut(spec_error, extra):
    tag = "!" + "x" * (400 - len(TAG_ERROR) - 3 + extra)
    what = f"{TAG_ERROR}{tag!r}"   # 400 or 401 characters
    p = only(spec_error(f"name: {tag} v\n"))
    assert p.message == "not valid YAML: line 1, column 7: " + (what[:397] + "..." if extra else what)


@pytest.mark.parametrize("text, what", [("- a\n- b\n", "list"), ("", "empty"), ("just a string\n", "str")])
def test_document_that_is_not_a_mapping(spec_error, text, what):
    p = only(spec_error(text))
    assert what in p.message and "a spec is a mapping" in p.message
    assert "draft" in p.allowed and "decoding" in p.allowed


def test_import_path_is_just_an_unknown_name_and_never_imported(base, spec_error, tmp_path, monkeypatch):
    (tmp_path / "ds_trap_module.py").write_text("raise SystemExit('draftsmith imported a name from YAML')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    base["draft"]["mlp"] = {"kind": "ds_trap_module.Thing"}
    base["draft"]["layer"] = {"kind": "ds_trap_module:Thing"}
    err = spec_error(base)
    assert [p.path for p in err.problems] == ["draft.layer.kind", "draft.mlp.kind"]
    for p in err.problems:
        assert p.message.startswith("unknown ") and "never imported" in p.hint
    assert "ds_trap_module" not in sys.modules


def test_all_problems_of_both_phases_in_one_error(base, spec_error):
    base["draft"]["norms"]["inptu"] = "all"                  # phase 1: unknown field
    base["decoding"]["topk"] = "four"                        # phase 1: type
    base["draft"]["attention"] = {"kind": "gqq"}             # phase 2: unknown name
    base["draft"]["fusion"]["aux_layers"] = "auot"           # phase 2: component params
    base["decoding"]["attention"] = "flashy"                 # phase 2: backend
    base["weights"]["ignore"] = ["("]                        # phase 2: regex
    err = spec_error(base)
    assert sorted(p.path for p in err.problems) == sorted([
        "draft.norms.inptu", "decoding.topk", "draft.attention.kind", "draft.fusion.aux_layers",
        "decoding.attention", "weights.ignore.0"])
    assert "has 6 problems" in str(err)
    assert all(f"  {p.path}: " in str(err) for p in err.problems)


def test_cross_field_rules_and_shape_problems_together(base, spec_error):
    del base["draft"]["fusion"]
    base["decoding"].update(mode="v2", topk=1, draft_tokens=6)
    err = spec_error(base)
    assert [p.path for p in err.problems] == ["draft.fusion", "decoding.mode"]


def test_a_valid_spec_loads_and_remembers_its_file(base, tmp_path, registry):
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(base))
    spec = draftsmith.load_spec(path, registry=registry)
    assert spec.source == str(path) and spec.draft.fusion.params["norm_before_residual"] is False


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 300) | st.sampled_from(["auto", "gqa", "v2", "(", "x.y", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["kind", "ids", "at", "x"]),
                                                                inner, max_size=3),
    max_leaves=6)
PATHS = [("name",), ("draft",), ("draft", "fusion"), ("draft", "fusion", "aux_layers"), ("draft", "attention"),
         ("draft", "num_layers"), ("draft", "norms"), ("weights",), ("weights", "rules"), ("weights", "ignore"),
         ("quant",), ("decoding",), ("decoding", "topk"), ("decoding", "attention"), ("decoding", "mode")]


@given(edits=st.lists(st.tuples(st.sampled_from(PATHS), json_values), min_size=1, max_size=3))
def test_any_malformed_spec_gives_a_spec_error_and_nothing_else(edits):
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    for path, value in edits:
        node = data
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = value
    registry = draftsmith.build_registry(entry_points=False)
    try:
        parse_spec(data, source="fuzz.yaml", registry=registry)
    except draftsmith.SpecError as err:
        assert err.problems and all(p.message for p in err.problems)
        assert len({(p.path, p.message) for p in err.problems}) == len(err.problems)


def test_a_spec_file_names_the_line_of_each_problem(tmp_path):
    path = tmp_path / "lines.yaml"
    path.write_text("name: lines\n"                                 # 1
                    "base: &b {kind: rms, ofset: 1}\n"              # 2
                    "draft:\n"                                      # 3
                    "  norm: *b\n"                                  # 4
                    "  fusion:\n"                                   # 5
                    "    kind: eagle3\n"                            # 6: norm_before_residual is missing here
                    "  attention: {kind: gqaa}\n"                   # 7
                    "weights:\n"                                    # 8
                    "  rules:\n"                                    # 9
                    "    - {match: '^a', replace: b}\n"             # 10
                    "    - {match: '^c', replace: d, extra: 1}\n")  # 11
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.load_spec(path)
    lines = {p.path: p.line for p in info.value.problems}
    # the aliased path at the alias, where it is used, saying where the value is (tests/specs/test_alias_places.py)
    assert lines == {"base": 2, "draft.norm.ofset": 4, "draft.fusion.norm_before_residual": 5,
                     "draft.attention.kind": 7, "weights.rules.1.extra": 11}
    assert "unknown field 'ofset' (via alias *b defined at line 2)" in str(info.value)
    assert "draft.attention.kind: unknown attention 'gqaa'. Did you mean 'gqa'? (line 7)" in str(info.value)
    with pytest.raises(draftsmith.SpecError) as info:   # plain data has no lines
        parse_spec(yaml.safe_load(path.read_text()))
    assert {p.line for p in info.value.problems} == {None} and "(line" not in str(info.value)


@pytest.mark.parametrize("word, value", [("on", "on"), ("off", "off"), ("'on'", "on"), ("auto", "auto")])
def test_graphs_written_unquoted_is_the_word_not_a_yaml_boolean(tmp_path, word, value):
    """YAML 1.1 reads an unquoted on / off as true / false; the README writes `graphs: on`."""
    path = tmp_path / "g.yaml"
    path.write_text(f"name: g\ndraft:\n  fusion: {{kind: eagle1}}\ndecoding: {{graphs: {word}}}\n")
    assert draftsmith.load_spec(path).decoding.graphs == value


@pytest.mark.parametrize("name", ["s.yaml", "s.spec", "s"])
@pytest.mark.parametrize("to", ["self", "nowhere"])
def test_a_spec_file_that_is_a_broken_link_is_said_as_one(tmp_path, to, name):
    """A link loop or a dangling link was 'does not exist', though `ls` shows the name; without a .yaml suffix it
    was 'no spec named' (found by a README audit)."""
    from draftsmith.specs.documents import SpecNotFound

    link = tmp_path / name
    link.symlink_to(link if to == "self" else tmp_path / "gone.yaml")
    with pytest.raises(SpecNotFound, match=f"spec file {link} is a link that leads nowhere"):
        draftsmith.load_spec(link)
    with pytest.raises(SpecNotFound, match="gone.yaml does not exist"):
        draftsmith.load_spec(tmp_path / "gone.yaml")


def test_a_path_that_does_not_exist_is_said_as_a_file(tmp_path, monkeypatch):
    """./NAME or a/b names a file (no spec name holds a '/'): 'spec file X does not exist', not 'no spec named'; a
    bare unknown name is still an unknown spec with the known ones."""
    from draftsmith.specs.documents import SpecNotFound

    monkeypatch.chdir(tmp_path)
    for ref in ("./mine", "specs/mine.spec"):
        with pytest.raises(SpecNotFound) as info:
            draftsmith.load_spec(ref)
        assert str(info.value) == f"spec file {ref.removeprefix('./')} does not exist"
    from draftsmith.registry.registry import UnknownSpec

    with pytest.raises(UnknownSpec, match="no spec named 'mine' and no such file. known: "):
        draftsmith.load_spec("mine")
