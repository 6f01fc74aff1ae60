"""`extends:` naming a base file a letter or a suffix away (base.yml, a bare 'base' beside base.yaml) names the file,
as --spec does (a mutation round's finding, 2026-12-01)."""
from __future__ import annotations

import pytest

import draftsmith
from draftsmith.errors import SpecError
from draftsmith.specs.catalog import BUILTIN_DIR


def extends_problem(tmp_path, ref: str):
    """The one problem of a spec beside the files in ``tmp_path`` that says ``extends: ref``."""
    (tmp_path / "mine.yaml").write_text(f"extends: {ref}\nname: mine\n")
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(tmp_path / "mine.yaml")
    (p,) = info.value.problems
    return p


@pytest.mark.parametrize("ref", ["base.yml", "base", "bsae.yaml"])
def test_a_near_base_file_is_named(tmp_path, ref):
    (tmp_path / "base.yaml").write_text((BUILTIN_DIR / "demo.yaml").read_text())
    p = extends_problem(tmp_path, ref)
    assert p.path == "extends" and f"Did you mean the file {str(tmp_path / 'base.yaml')!r}?" in str(p), str(p)


def test_a_registered_name_is_suggested_before_a_file(tmp_path):
    (tmp_path / "eagle3-lama.yaml").write_text("name: x\n")
    p = extends_problem(tmp_path, "eagle3-lama")
    assert "Did you mean 'eagle3-llama'?" in str(p) and "Did you mean the file" not in str(p)


def test_a_base_that_is_a_link_to_itself_is_said_so_not_offered_as_its_own_near_file(tmp_path):
    """A spec-perturbation hunt: 'the base spec file loop.yaml does not exist. Did you mean the file 'loop.yaml'?'"""
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    p = extends_problem(tmp_path, "loop.yaml")
    assert "loop.yaml is a link that leads nowhere (to itself, or to no file)" in str(p), str(p)
    assert "Did you mean" not in str(p)
