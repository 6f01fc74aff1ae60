"""A spec author's findings on ``extends:`` (a helper's hunt; each failed before its fix): a base's relative
checkpoints from a spec given with a folder, a quant method replacing the base's section, the spec's own aliased,
merged or listed values said as its own, a missing name as the spec's, a too-long extends path and a failing base
said as the loaded spec's problem at extends."""
from pathlib import Path

import pytest

import draftsmith
from draftsmith.assembler.folders import checkpoint_ref
from draftsmith.errors import SpecError


def _w(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_base_relative_checkpoints_from_a_child_given_with_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _w(tmp_path / "base/base.yaml", "name: b\nextends: eagle3-llama\ncheckpoints: {draft: ./d}\n")
    _w(tmp_path / "sub/child.yaml", "name: c\nextends: ../base/base.yaml\n")
    spec = draftsmith.load_spec("sub/child.yaml")
    assert Path(checkpoint_ref(spec, "draft")).resolve() == (tmp_path / "base/d").resolve()


def test_quant_method_change_replaces_the_section(tmp_path):
    p = _w(tmp_path / "q.yaml", "name: q\nextends: eagle1-llama-fp8\nquant: {method: none}\n")
    assert draftsmith.load_spec(p).quant.method == "none"


@pytest.mark.parametrize("body", [
    "decoding:\n  <<: {topk: 0}\n",                                              # a merge key of the child
    "weights:\n  rules:\n    - {mach: '^midlayer\\.', replace: 'layers.0.'}\n",  # a list replaces the base's
    "weights:\n  rules:\n    - &r {match: '(', replace: x}\n    - *r\n",          # an alias of the child
])
def test_child_own_values_not_said_from_the_base(tmp_path, body):
    p = _w(tmp_path / "c.yaml", "name: c\nextends: eagle3-llama\n" + body)
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(p)
    assert "from the base" not in str(e.value)
    assert e.value.problems and all(q.path.split(".")[0] in ("decoding", "weights") and q.line is not None and
                                    q.line > 2 for q in e.value.problems), e.value   # the spec's own lines


def test_base_merge_key_value_said_at_that_base(tmp_path):
    _w(tmp_path / "b1.yaml", "name: b1\nextends: eagle3-llama\ndecoding:\n  <<: {topk: 0}\n")
    p = _w(tmp_path / "c1.yaml", "name: c1\nextends: b1.yaml\n")
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(p)
    assert "b1.yaml" in str(e.value) and "eagle3-llama.yaml" not in str(e.value)


def test_missing_name_is_the_childs(tmp_path):
    p = _w(tmp_path / "n.yaml", "extends: demo\n")
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(p)
    assert "from the base" not in str(e.value)
    assert [(q.path, q.message) for q in e.value.problems] == [("name", "required field is missing")]


def test_too_long_extends_path_is_a_spec_error(tmp_path):
    p = _w(tmp_path / "l.yaml", "name: l\nextends: " + "a" * 300 + ".yaml\n")
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(p)
    assert [q.path for q in e.value.problems] == ["extends"]


@pytest.mark.parametrize("make", ["depth", "binary"])
def test_a_base_failure_is_the_loaded_specs_error(tmp_path, make):
    if make == "depth":
        _w(tmp_path / "c0.yaml", "name: c0\nextends: demo\n")
        for i in range(1, 9):
            _w(tmp_path / f"c{i}.yaml", f"name: c{i}\nextends: c{i - 1}.yaml\n")
        p = tmp_path / "c8.yaml"
    else:
        (tmp_path / "bin.yaml").write_bytes(b"x\0")
        p = _w(tmp_path / "c.yaml", "name: c\nextends: bin.yaml\n")
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(p)
    assert e.value.source == str(p)   # README: a base that does not read, or loops, is a problem at `extends`
    [q] = e.value.problems
    said = {"depth": "more than 8 bases in one chain", "binary": "does not read: the file is binary"}[make]
    assert q.path == "extends" and q.line == 2 and said in q.message, q


def test_a_base_through_a_symlink_keeps_its_checkpoints_where_it_is_named(tmp_path):
    """A base read through a link: its relative checkpoints are relative to the folder it is named in, as the base
    loaded alone and its own extends read them (the resolved folder was taken)."""
    _w(tmp_path / "real/base.yaml", "name: base\nextends: eagle3-llama\ncheckpoints: {draft: ./d}\n")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs/base.yaml").symlink_to(tmp_path / "real/base.yaml")
    child = draftsmith.load_spec(_w(tmp_path / "specs/child.yaml", "name: c\nextends: base.yaml\n"))
    alone = draftsmith.load_spec(tmp_path / "specs/base.yaml")
    assert checkpoint_ref(child, "draft") == checkpoint_ref(alone, "draft") == str(tmp_path / "specs/d")


def test_a_bases_own_extends_that_names_nothing_is_said_as_the_bases(tmp_path):
    _w(tmp_path / "base.yaml", "name: base\nextends: [eagle3-llama]\n")
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(_w(tmp_path / "c.yaml", "name: c\nextends: base.yaml\nquant: {scheme: block}\n"))
    [q] = e.value.problems   # and nothing of what c writes, whose kinds would be the base's
    assert q.path == "extends" and f"(in the base {tmp_path / 'base.yaml'}) extends: " in q.message, q


def test_a_registered_base_whose_file_is_gone_is_a_problem_at_extends(tmp_path):
    _w(tmp_path / "folder/gone.yaml", "name: gone\nextends: eagle3-llama\n")
    registry = draftsmith.build_registry(entry_points=False, spec_path=str(tmp_path / "folder"))
    (tmp_path / "folder/gone.yaml").unlink()
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(_w(tmp_path / "c.yaml", "name: c\nextends: gone\n"), registry)
    [q] = e.value.problems
    assert e.value.source == str(tmp_path / "c.yaml") and q.path == "extends" and "gone" in q.message, q
