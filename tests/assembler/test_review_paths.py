"""Paths: an empty string is refused as empty (Path("") is the current folder, which was reported as 'spec file .
is not a regular file' or '`.`: no config.json'), and checkpoint folders are shown without '..' parts (a built-in
spec's 'specs/builtin/../../demo_data/target'), keeping the names a user wrote through a symlink."""
import os
import re
from pathlib import Path

import pytest

import draftsmith
from draftsmith.assembler.assemble import plan_assembly
from draftsmith.errors import OptionError


def test_an_empty_spec_is_refused_as_empty():
    with pytest.raises(OptionError, match="^the spec is an empty string: give a spec name"):
        draftsmith.load_spec("")


@pytest.mark.parametrize("which", ["target", "draft"])
def test_an_empty_folder_is_refused_as_empty(which):
    with pytest.raises(OptionError, match=f"^the {which} folder is an empty string: give the folder of the {which} "):
        draftsmith.assemble("demo", **{which: ""})


@pytest.mark.parametrize("which", ["target", "draft"])
@pytest.mark.parametrize("given, said", [(5, "the int 5"), (["a"], "the list ['a']"), (b"/tmp", "the bytes b'/tmp'")])
def test_a_folder_that_is_no_path_is_refused_naming_the_argument(which, given, said):
    """pathlib's TypeError ('expected str, bytes or os.PathLike object, not int') was raised as it was."""
    with pytest.raises(OptionError, match=rf"^{which}: a folder path \(a str or os.PathLike\), got {re.escape(said)}$"):
        draftsmith.assemble("demo", **{which: given})


def test_a_pathlike_folder_is_taken():
    demo = Path(draftsmith.__file__).parent / "demo_data"
    model = draftsmith.assemble("demo", target=demo / "target", draft=os.fspath(demo / "draft"))
    assert model.folders["target"] == demo / "target"


def test_a_builtin_specs_folders_are_shown_normalized():
    plan = plan_assembly("demo")
    for folder in (plan.target_dir, plan.draft_dir):
        assert ".." not in folder.parts and folder.parts[-2:-1] == ("demo_data",), folder


def test_tidy_keeps_a_symlinked_name_and_follows_a_link_before_dotdot(tmp_path):
    from draftsmith.assembler.folders import tidy

    (tmp_path / "real" / "deep" / "sub").mkdir(parents=True)
    (tmp_path / "deep").mkdir()   # what normpath would make of 'jump/../deep': another folder
    (tmp_path / "models").symlink_to(tmp_path / "real")
    (tmp_path / "jump").symlink_to(tmp_path / "real" / "deep")
    assert tidy(tmp_path / "models" / "deep" / ".." / "deep") == tmp_path / "models" / "deep"   # the user's name
    assert str(tidy(Path("a") / ".." / "b")) == "a/../b"   # missing: as written, for the error that says so
    jumped = tidy(tmp_path / "jump" / ".." / "deep")   # 'jump/..' is real/, not tmp_path
    assert os.path.samefile(jumped, tmp_path / "real" / "deep") and ".." not in jumped.parts
