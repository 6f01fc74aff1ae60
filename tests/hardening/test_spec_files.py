"""Spec files as untrusted input: bounded, strict, and every refusal a SpecError naming the file, within 1 s."""
import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import draftsmith
from draftsmith import limits
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.errors import SpecError
from draftsmith.specs.documents import load_yaml_text, read_text
from draftsmith.specs.loader import spec_name_for
from draftsmith.specs.schema import Spec, validate_strict

from hardening_helpers import make_fifo, quick, refused

BASE_TEXT = (BUILTIN_DIR / "eagle3-llama.yaml").read_text()
BASE = yaml.safe_load(BASE_TEXT)


@pytest.fixture
def registry():
    return draftsmith.build_registry(entry_points=False)


def load_text(tmp_path, text, registry, name="spec.yaml"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return draftsmith.load_spec(path, registry=registry), path


def problems_of(tmp_path, text, registry) -> SpecError:
    path = tmp_path / "spec.yaml"
    with refused(kind=SpecError) as r:
        load_text(tmp_path, text, registry)
    assert r.value.source == str(path) and str(path) in str(r.value)
    return r.value


def bomb(levels: int, width: int = 9) -> str:
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_a_checked_field_is_refused_with_a_short_message(tmp_path, registry):
    text = bomb(8) + BASE_TEXT.replace("name: eagle3-llama", "name: *a7")
    assert len(bomb(8)) < 700  # 9**8 = 43 million leaves when expanded
    err = problems_of(tmp_path, text, registry)
    assert "alias" in str(err) and len(str(err)) < 500


@pytest.mark.parametrize("field", ["name", "description", "draft.fusion.kind", "decoding.topk",
                                   "weights.rules.0.match", "quant"])
def test_a_smaller_alias_bomb_anywhere_gives_a_bounded_message(tmp_path, registry, field):
    data = copy.deepcopy(BASE)
    part, *rest = field.split(".")
    node = data
    for key in [part, *rest][:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    last = [part, *rest][-1]
    node[int(last) if isinstance(node, list) else last] = "BOMB"
    text = bomb(4) + yaml.safe_dump(data, sort_keys=False).replace("BOMB", "*a3")  # 6561 leaves: allowed size
    err = problems_of(tmp_path, text, registry)
    assert len(str(err)) < 2000


def test_recursive_alias_duplicate_keys_and_deep_nesting(tmp_path, registry):
    assert "contains itself" in str(problems_of(tmp_path, "name: &a [*a]\n", registry))
    err = problems_of(tmp_path, BASE_TEXT + "name: other\n", registry)
    line = BASE_TEXT.count("\n") + 1
    assert "  name: the key appears twice in one mapping (first at line 1); YAML would keep the last. Remove one " \
        f"of them (line {line})" in str(err)
    deep = "name: " + "[" * 20_000 + "]" * 20_000 + "\n"
    assert "nesting deeper than" in str(problems_of(tmp_path, deep, registry))


def test_binary_non_utf8_oversized_and_non_plain_specs(tmp_path, registry):
    assert "binary" in str(problems_of(tmp_path, b"\x00\x01\x02name: x", registry))
    assert "not UTF-8" in str(problems_of(tmp_path, "name: caf\xe9\n".encode("latin-1"), registry))
    big = "name: " + "a" * (2 * 1024 * 1024) + "\n"  # a 2 MB spec name
    assert f"at most {limits.SPEC_BYTES} bytes" in str(problems_of(tmp_path, big, registry))
    dated = BASE_TEXT.replace("description: ", "description: 2024-01-01\nx: ")
    assert "timestamp" in str(problems_of(tmp_path, dated, registry))


def test_a_2mb_name_through_the_api_is_refused_quickly_and_briefly(registry):
    data = {**BASE, "name": "a" * 2_000_000, "description": "d" * 2_000_000}
    with refused(kind=SpecError) as r:
        draftsmith.parse_spec(data, registry=registry)
    assert {p.path for p in r.value.problems} == {"name", "description"} and len(str(r.value)) < 1000


def test_a_fifo_named_like_a_spec_is_refused_not_read(tmp_path, registry):
    fifo = make_fifo(tmp_path / "spec.yaml")
    with refused(kind=draftsmith.errors.NotFound):
        draftsmith.load_spec(fifo, registry=registry)


def with_value(keys, value):
    data = copy.deepcopy(BASE)
    node = data
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    return data


STRICT = [(("decoding", "topk"), True, "true"), (("decoding", "steps"), "5", "'5'"),
          (("decoding", "draft_tokens"), 8.0, "8.0"), (("draft", "fusion", "norm_before_residual"), "yes", "'yes'"),
          (("draft", "num_layers"), 1.0, "1.0"), (("draft", "norms", "input"), 1, "1"),
          (("decoding", "topk"), float("nan"), ".nan"), (("decoding", "page_size"), float("inf"), ".inf"),
          (("decoding", "steps"), None, "null"), (("decoding", "topk"), float("-inf"), "-.inf")]   # as YAML writes them


@pytest.mark.parametrize("keys, value, found", STRICT)
def test_fields_are_strict_not_coerced(tmp_path, registry, keys, value, found):
    err = problems_of(tmp_path, yaml.safe_dump(with_value(keys, value)), registry)
    path = ".".join(keys)
    assert [p.path for p in err.problems] == [path]
    assert f"{path}: {found} is not allowed" in str(err)


def test_every_strictness_problem_is_listed_at_once(tmp_path, registry):
    data = copy.deepcopy(BASE)
    for keys, value, _ in STRICT[:4]:
        node = data
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    err = problems_of(tmp_path, yaml.safe_dump(data), registry)
    assert f"{tmp_path / 'spec.yaml'} has 4 problems" in str(err)


@pytest.mark.parametrize("old, new, path", [
    ("num_layers: auto", "num_layers: 1000000", "draft.num_layers"),
    ("page_size: 1", "page_size: 1000000000", "decoding.page_size"),
    ("page_size: 1", "page_size: 1.0e9", "decoding.page_size"),
    ("draft_tokens: 8", "draft_tokens: 1000000", "decoding.draft_tokens"),
    ("topk: 4", "topk: 100000", "decoding.topk"),
    ("steps: 5", "steps: 100000", "decoding.steps"),
])
def test_sizes_are_bounded_in_the_spec(tmp_path, registry, old, new, path):
    err = problems_of(tmp_path, BASE_TEXT.replace(old, new), registry)
    assert path in {p.path for p in err.problems}


@pytest.mark.parametrize("field, lowest", [("topk", 1), ("steps", 1), ("draft_tokens", 2), ("page_size", 1)])
def test_decoding_sizes_have_a_lowest_value(registry, field, lowest):
    data = {**BASE, "decoding": {"draft_tokens": 2, field: lowest}}   # 2 tokens: a tree of any topk and steps
    assert getattr(draftsmith.parse_spec(data, registry=registry).decoding, field) == lowest
    with pytest.raises(SpecError) as info:
        draftsmith.parse_spec({**data, "decoding": {**data["decoding"], field: lowest - 1}}, registry=registry)
    assert [p.path for p in info.value.problems] == [f"decoding.{field}"]


# --- generated inputs ---------------------------------------------------------------------------------------------

@settings(max_examples=60)
@given(st.binary(max_size=400))
def test_random_bytes_as_a_spec_end_in_a_spec_error_quickly(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("rnd") / "spec.yaml"
    path.write_bytes(data)
    with quick():
        try:
            draftsmith.load_spec(path)
        except SpecError as e:
            assert str(path) in str(e)


yaml_ish = st.text(st.sampled_from(list("ab:&*[]{},-\n !'\"#|>?1.\t")), max_size=200)


@settings(max_examples=60)
@given(yaml_ish)
def test_random_yaml_shaped_text_ends_in_a_spec_error_quickly(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("rnd") / "spec.yaml"
    path.write_text(text)
    with quick():
        with pytest.raises(SpecError):
            draftsmith.load_spec(path)


LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                   st.text(max_size=30), st.just("a" * 100_000))
VALUES = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


def _paths(data, prefix=()):
    yield prefix
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _paths(v, (*prefix, i))


ALL_PATHS = [p for p in _paths(BASE) if p]


@settings(max_examples=80)
@given(st.sampled_from(ALL_PATHS), VALUES)
def test_any_value_in_any_field_gives_a_spec_or_a_spec_error(path, value):
    data = copy.deepcopy(BASE)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with quick():
        try:
            spec = draftsmith.parse_spec(data, source="gen.yaml")
        except SpecError as e:
            assert len(str(e)) < 5000
        else:
            assert spec.name  # accepted: it must be a Spec


# --- the bounds at their edges (mutation survivors of specs/loader.py) --------------------------------------------

@pytest.mark.parametrize("extra", [0, 1])
def test_a_spec_of_exactly_spec_bytes_is_read_whole_and_one_byte_more_is_refused(tmp_path, registry, extra):
    body = BASE_TEXT.replace("name: eagle3-llama\n", "") + "name: eagle3-llama"  # its last byte ends the name
    text = "#" + "x" * (limits.SPEC_BYTES - len(body) - 2 + extra) + "\n" + body
    if extra:
        err = problems_of(tmp_path, text, registry)
        assert f"the file is {limits.SPEC_BYTES + 1} bytes; a spec is at most {limits.SPEC_BYTES}" in str(err)
    else:
        assert load_text(tmp_path, text, registry)[0].name == "eagle3-llama"


@pytest.mark.parametrize("levels", [31, 32])
def test_yaml_text_may_nest_yaml_depth_levels_and_the_next_level_is_refused_naming_its_line(tmp_path, registry,
                                                                                          levels):
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
def test_plain_data_may_nest_yaml_depth_levels_counting_an_empty_innermost_list(registry, levels, leaf, refused):
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
def test_an_alias_is_measured_again_where_it_is_used_deeper(tmp_path, registry, wraps):
    # `a` is 16 levels and measured first; its second use sits under `wraps` lists: 1 + wraps + 16 levels
    text = f"a: &a {'[' * 16}1{']' * 16}\nname: x\ndescription: {'[' * wraps}*a{']' * wraps}\n"
    problems = [(p.path, p.message) for p in problems_of(tmp_path, text, registry).problems]
    if 1 + wraps + 16 > limits.YAML_DEPTH:
        too_deep = f"nesting deeper than {limits.YAML_DEPTH} levels (aliases expanded)"
        assert problems == [("description" + ".0" * wraps, f"{too_deep} (via alias *a defined at line 1)")]
    else:
        assert not [m for _, m in problems if "nesting" in m], problems


def test_plain_data_nested_far_too_deep_is_refused_without_recursing(registry):
    with refused(kind=SpecError) as r:
        draftsmith.parse_spec({**BASE, "description": nested(5_000, 1)}, registry=registry)
    assert r.value.problems[0].message == f"nesting deeper than {limits.YAML_DEPTH} levels (aliases expanded)"


def count_values(data):
    items = data.values() if isinstance(data, dict) else data if isinstance(data, list) else ()
    return 1 + sum(count_values(v) for v in items)


@pytest.mark.parametrize("extra", [0, 1])
def test_a_spec_may_hold_yaml_nodes_values_and_one_more_is_refused(registry, extra):
    size = limits.YAML_NODES + extra - count_values({**BASE, "description": []})
    with pytest.raises(SpecError) as info:
        draftsmith.parse_spec({**BASE, "description": ["x"] * size}, registry=registry)
    problems = [(p.path, p.message) for p in info.value.problems]
    if extra:
        assert problems == [("", f"more than {limits.YAML_NODES} values with every alias expanded "
                                 "(a spec has about 50)")]
    else:
        assert [path for path, _ in problems] == ["description"]


@pytest.mark.parametrize("length", [300, 301])
@pytest.mark.parametrize("read, says", [(lambda p, reg: draftsmith.load_spec(p, registry=reg), "does not exist"),
                                        (lambda p, reg: read_text(p), "is not a regular file")],
                         ids=["load_spec", "read_text"])
def test_a_missing_spec_file_is_named_in_full_up_to_300_characters(tmp_path, registry, length, read, says):
    path = str(tmp_path / ("p" * (length - len(str(tmp_path)) - 6) + ".yaml"))
    assert len(path) == length
    with refused(kind=draftsmith.errors.NotFound) as r:
        read(Path(path), registry)
    shown = path if length <= 300 else f"{path[:148]}...{path[-148:]}"
    assert str(r.value) == f"spec file {shown} {says}"


@pytest.mark.parametrize("text, name", [("Llama 3 Draft", "llama-3-draft"), ("-._x._-", "x"), ("???", "draft"),
                                        ("", "draft"), ("a" * 99 + " b", "a" * 99), ("B" * 150, "b" * 100)])
def test_spec_name_for_makes_a_valid_name_from_any_folder_name(text, name):
    assert spec_name_for(text) == name


@given(st.text(max_size=300))
def test_spec_name_for_any_text_is_a_valid_spec_name(text):
    name = spec_name_for(text)
    assert validate_strict(Spec, {**BASE, "name": name}).name == name


def test_a_folder_given_as_a_spec_is_named_as_not_a_file(tmp_path, registry):
    """`validate .`: an existing folder is not "no such file"; a registered name still wins over a folder."""
    with refused(kind=draftsmith.errors.NotFound) as r:
        draftsmith.load_spec(tmp_path, registry=registry)
    assert str(r.value) == f"spec file {tmp_path} is not a regular file (a spec is one YAML file)"
    (tmp_path / "demo").mkdir()
    import os

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert draftsmith.load_spec("demo", registry=registry).name == "demo"
    finally:
        os.chdir(here)


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
