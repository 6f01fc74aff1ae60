"""Spec files as untrusted input, each bound at its edge (mutation survivors of specs/loader.py): a spec of exactly
limits.SPEC_BYTES is read and one byte more refused; YAML text and plain data may nest limits.YAML_DEPTH levels (an
alias measured again where it is used deeper, data far too deep refused without recursing); limits.YAML_NODES values
and one more, counted before the YAML is built; an integer Python will not print is a SpecError at its place. The
other spec file tests: test_spec_files.py."""
import copy

import pytest
import yaml

import draftsmith
from draftsmith import limits
from draftsmith.errors import SpecError
from draftsmith.specs.documents import load_yaml_text
from draftsmith.specs.schema import validate_strict

from hardening_helpers import refused
from test_spec_files import BASE, BASE_TEXT, load_text, problems_of, registry  # noqa: F401  (registry: a fixture)


# --- the bounds at their edges (mutation survivors of specs/loader.py) --------------------------------------------

@pytest.mark.parametrize("extra", [0, 1])
def test_a_spec_of_exactly_spec_bytes_is_read_whole_and_one_byte_more_is_refused(
        tmp_path, registry, extra):  # noqa: F811 (the fixture imported above)
    body = BASE_TEXT.replace("name: eagle3-llama\n", "") + "name: eagle3-llama"  # its last byte ends the name
    text = "#" + "x" * (limits.SPEC_BYTES - len(body) - 2 + extra) + "\n" + body
    if extra:
        err = problems_of(tmp_path, text, registry)
        assert f"the file is {limits.SPEC_BYTES + 1} bytes; a spec is at most {limits.SPEC_BYTES}" in str(err)
    else:
        assert load_text(tmp_path, text, registry)[0].name == "eagle3-llama"


@pytest.mark.parametrize("levels", [31, 32])
def test_yaml_text_may_nest_yaml_depth_levels_and_the_next_level_is_refused_naming_its_line(
        tmp_path, registry, levels):  # noqa: F811 (the fixture imported above)
    # the mapping before it opens and closes two levels: the count goes back down by one per level
    text = "name: x\nweights: {ignore: []}\ndescription: " + "[" * levels + "]" * levels + "\n"
    problems = [(p.path, p.message) for p in problems_of(tmp_path, text, registry).problems]
    if levels + 1 > limits.YAML_DEPTH:
        assert problems == [("", f"nesting deeper than {limits.YAML_DEPTH} levels (line 3)")]
    else:
        assert not [m for _, m in problems if "nesting" in m], problems


def nested(levels, leaf):
    for _ in range(levels):
        leaf = [leaf]
    return leaf


@pytest.mark.parametrize("levels, leaf, refused", [(31, 1, False), (32, 1, True), (31, [], True)])
def test_plain_data_may_nest_yaml_depth_levels_counting_an_empty_innermost_list(
        registry, levels, leaf, refused):  # noqa: F811 (the fixture imported above)
    # the spec's mapping is level 1, `description` level 2: 32 levels in all, or 33 where the last is [1] or []
    with pytest.raises(SpecError) as info:
        draftsmith.parse_spec({**BASE, "description": nested(levels, leaf)}, registry=registry)
    problems = [(p.path, p.message) for p in info.value.problems]
    if refused:
        too_deep = f"nesting deeper than {limits.YAML_DEPTH} levels (aliases expanded)"
        assert problems == [("description" + ".0" * (limits.YAML_DEPTH - 1), too_deep)]
    else:
        assert [path for path, _ in problems] == ["description"]  # a list is not a string, and nothing else


@pytest.mark.parametrize("wraps", [15, 16])
def test_an_alias_is_measured_again_where_it_is_used_deeper(tmp_path, registry, wraps):  # noqa: F811 (the fixture)
    # `a` is 16 levels and measured first; its second use sits under `wraps` lists: 1 + wraps + 16 levels
    text = f"a: &a {'[' * 16}1{']' * 16}\nname: x\ndescription: {'[' * wraps}*a{']' * wraps}\n"
    problems = [(p.path, p.message) for p in problems_of(tmp_path, text, registry).problems]
    if 1 + wraps + 16 > limits.YAML_DEPTH:
        too_deep = f"nesting deeper than {limits.YAML_DEPTH} levels (aliases expanded)"
        assert problems == [("description" + ".0" * wraps, f"{too_deep} (via alias *a defined at line 1)")]
    else:
        assert not [m for _, m in problems if "nesting" in m], problems


def test_plain_data_nested_far_too_deep_is_refused_without_recursing(registry):  # noqa: F811 (the fixture)
    with refused(kind=SpecError) as r:
        draftsmith.parse_spec({**BASE, "description": nested(5_000, 1)}, registry=registry)
    assert r.value.problems[0].message == f"nesting deeper than {limits.YAML_DEPTH} levels (aliases expanded)"


def count_values(data):
    items = data.values() if isinstance(data, dict) else data if isinstance(data, list) else ()
    return 1 + sum(count_values(v) for v in items)


@pytest.mark.parametrize("extra", [0, 1])
def test_a_spec_may_hold_yaml_nodes_values_and_one_more_is_refused(registry, extra):  # noqa: F811 (the fixture)
    size = limits.YAML_NODES + extra - count_values({**BASE, "description": []})
    with pytest.raises(SpecError) as info:
        draftsmith.parse_spec({**BASE, "description": ["x"] * size}, registry=registry)
    problems = [(p.path, p.message) for p in info.value.problems]
    if extra:
        assert problems == [("", f"more than {limits.YAML_NODES} values with every alias expanded "
                                 "(a spec has about 50)")]
    else:
        assert [path for path, _ in problems] == ["description"]


# --- integers Python will not print (json.dumps and every message need it) ---------------------------------------

@pytest.mark.parametrize("digits, says", [("9" * 5000, "an integer of 5000 characters"),       # int() refuses it
                                          ("0x" + "f" * 5000, "an integer of more than 100 digits")],  # hex: no limit
                         ids=["decimal", "hex"])
def test_a_huge_integer_in_a_spec_file_is_a_spec_error_with_its_place(tmp_path, digits, says):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE_TEXT.replace("{topk: 4,", f"{{topk: {digits},"))
    with refused(kind=SpecError) as r:
        draftsmith.load_spec(path)
    assert says in str(r.value) and len(str(r.value)) < 1000
    line = next(i for i, text in enumerate(BASE_TEXT.splitlines(), 1) if "{topk: 4," in text)
    assert f"line {line}" in str(r.value) or [p.path for p in r.value.problems] == ["decoding.topk"]


@pytest.mark.parametrize("where", ["value", "key", "nested"])
def test_a_huge_integer_in_spec_data_is_a_spec_error_at_its_path(where):
    data = copy.deepcopy(BASE)
    huge = 10 ** limits.INT_DIGITS
    if where == "value":
        data["decoding"]["topk"] = huge
    elif where == "key":
        data["decoding"][huge] = 1
    else:
        data["draft"]["fusion"]["aux_layers"] = {"ids": [1, -huge]}
    with refused(kind=SpecError) as r:
        draftsmith.parse_spec(data, source="gen.yaml")
    path = {"value": "decoding.topk", "key": "decoding", "nested": "draft.fusion.aux_layers.ids.1"}[where]
    assert [p.path for p in r.value.problems] == [path] and "about 101 digits" in str(r.value)


def test_an_integer_below_the_digit_bound_gets_the_fields_own_message():
    data = copy.deepcopy(BASE)
    data["decoding"]["topk"] = 10 ** limits.INT_DIGITS - 1
    with refused(kind=SpecError) as r:
        draftsmith.parse_spec(data, source="gen.yaml")
    assert "an integer <= 64" in str(r.value)


def test_validate_strict_takes_any_integer_as_data():
    from pydantic import ValidationError
    from draftsmith.specs.schema import Decoding
    looped = [1]
    looped.append(looped)
    for value in (10 ** 5000, [2, -10 ** 5000], {"a": 10 ** 5000}, looped):
        with pytest.raises(ValidationError):
            validate_strict(Decoding, {"topk": value})


@pytest.mark.parametrize("extra", [0, 1])
def test_yaml_text_past_the_node_bound_is_refused_before_it_is_built(monkeypatch, extra):
    # {x: [items]} is 2 values besides the items (a key is not a value, as check_plain_data counts)
    text = "x: [" + ", ".join(["0"] * (limits.YAML_NODES - 2 + extra)) + "]\n"
    built = []
    from draftsmith.specs.yaml_loader import SpecLoader
    monkeypatch.setattr(SpecLoader, "get_single_data", lambda self: built.append(1))
    try:
        load_yaml_text(text, "big.yaml")
    except SpecError as e:
        assert extra and [p.message for p in e.problems] == [f"more than {limits.YAML_NODES} values by line 1 (a "
                                                             "spec has about 50)"] and not built
    else:
        assert not extra and built


def test_mapping_keys_and_nested_collections_count_as_check_plain_data_counts(monkeypatch):
    doc = {"a": [1, {"b": 2, "c": [3, 4]}], "d": {"e": None}}
    text = yaml.safe_dump(doc)
    monkeypatch.setattr(limits, "YAML_NODES", count_values(doc))   # 10: mappings, lists and scalars, no keys
    assert load_yaml_text(text) == doc
    monkeypatch.setattr(limits, "YAML_NODES", count_values(doc) - 1)
    with pytest.raises(SpecError, match="more than 9 values"):
        load_yaml_text(text)
