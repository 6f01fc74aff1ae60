"""Spec files as untrusted input: bounded, strict, and every refusal a SpecError naming the file, within 1 s. Alias
bombs, recursive aliases, duplicate keys, binary or non-UTF-8 text, a FIFO; fields strict, not coerced; sizes
bounded; random bytes, YAML-shaped text and any value in any field; a missing file or a folder named in full. Each
bound at its edge (bytes, nesting depth, values, integer digits): test_spec_file_bounds.py."""
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
from draftsmith.specs.documents import read_text
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


# --- files and names (mutation survivors of specs/loader.py; its bounds: test_spec_file_bounds.py) ----------------

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
