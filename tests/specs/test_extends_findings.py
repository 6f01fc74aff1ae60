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
