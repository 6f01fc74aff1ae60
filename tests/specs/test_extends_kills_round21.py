"""Kills for specs/extends.py survivors (round 21b): an ``extends`` that names nothing left to the schema, a problem
in a value a base writes only the top of (a missing field, a top-level value) said from that base, which of two
bases a problem is said from, the column of the ``extends`` line, and a spec given as data (no text, no file)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import draftsmith
from draftsmith.errors import SpecError
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.specs.loader import parse_spec


def whole(**changed) -> dict:
    """eagle3-llama's document with ``changed`` top-level values."""
    return {**yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text()), **changed}


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def problems(call) -> dict:
    with pytest.raises(SpecError) as info:
        call()
    return {p.path: p for p in info.value.problems}


@pytest.mark.parametrize("ref", [5, ""])
def test_an_extends_that_is_no_name_is_the_schemas_to_refuse_not_a_crash(ref):
    """``extends: 5`` or ``extends: ''`` names no base: the merge leaves the document as it is and the schema says
    the problem at ``extends`` (an int reaching the base lookup was an AttributeError)."""
    found = problems(lambda: parse_spec(whole(name="m", extends=ref)))
    assert list(found) == ["extends"], found


def test_a_field_missing_under_a_mapping_only_the_base_writes_is_said_from_the_base(tmp_path):
    """The base writes ``draft`` (one part of the path ``draft.fusion``) and the spec writes none of it: the missing
    field is the base's, said at the spec's extends line (line 2, column 1) naming the base and its draft line."""
    base = whole(name="base")
    del base["draft"]["fusion"]
    write(tmp_path / "base.yaml", base)
    found = problems(lambda: draftsmith.load_spec(write(tmp_path / "m.yaml", "name: m\nextends: base.yaml\n")))
    p = found["draft.fusion"]
    draft_line = 1 + next(i for i, s in enumerate((tmp_path / "base.yaml").read_text().splitlines())
                          if s.startswith("draft:"))
    assert (p.line, p.column) == (2, 1), p
    assert f"from the base {tmp_path / 'base.yaml'}, line {draft_line}" in p.message, p


def test_a_problem_from_a_spec_given_as_data_is_still_said_from_its_base(tmp_path):
    """parse_spec of data with a label for its source (no text, no file: nothing of the spec is written anywhere):
    a problem in a top-level value only the base writes is said from the base (no line to put it at)."""
    write(tmp_path / "base.yaml", whole(name="base", decoding=5))
    found = problems(lambda: parse_spec({"name": "m", "extends": str(tmp_path / "base.yaml")}, source="<spec>"))
    p = found["decoding"]
    assert p.line is None and f"from the base {tmp_path / 'base.yaml'}, line" in p.message, p


def test_a_spec_file_parsed_without_its_text_places_an_inherited_problem_from_the_file(tmp_path):
    """parse_spec(data, source=FILE) without ``text`` reads the spec's own places from FILE (a label or a given text
    is not read): the inherited problem is said at FILE's extends line."""
    base = whole(name="base")
    del base["draft"]["fusion"]
    write(tmp_path / "base.yaml", base)
    path = write(tmp_path / "m.yaml", "name: m\n\nextends: base.yaml\n")
    found = problems(lambda: parse_spec({"name": "m", "extends": "base.yaml"}, source=str(path)))
    assert found["draft.fusion"].line == 3 and "from the base" in found["draft.fusion"].message


def test_each_problem_of_a_two_base_chain_names_the_base_that_wrote_it(tmp_path):
    """spec -> near.yaml -> far.yaml: far's bad ``decoding`` is said from far.yaml, near's bad ``quant`` from
    near.yaml (line 4), both at the spec's extends line (line 4, column 1)."""
    write(tmp_path / "far.yaml", whole(name="far", decoding=5))
    write(tmp_path / "near.yaml", "name: near\nextends: far.yaml\n\nquant: 7\n")
    found = problems(lambda: draftsmith.load_spec(write(tmp_path / "m.yaml", "name: m\n\n\nextends: near.yaml\n")))
    far, near = found["decoding"], found["quant"]
    assert f"from the base {tmp_path / 'far.yaml'}, line" in far.message, far
    assert f"from the base {tmp_path / 'near.yaml'}, line 4" in near.message, near
    assert (far.line, far.column, near.line, near.column) == (4, 1, 4, 1)

