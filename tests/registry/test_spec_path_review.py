"""DRAFTSMITH_SPEC_PATH, after review: a folder spec named like a file (``name: mine.yaml``) is refused naming its
file (as a reference it is read as a path: ./mine.yaml of the working directory); a symlink to a file already read
is that file, not a clash; a ``~`` in an entry is expanded, quoted or not."""
import os

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.registry.spec_path import SPEC_PATH, spec_folders
from test_spec_path import family   # a valid spec file in a folder, shared


@pytest.fixture
def fresh():
    """The process-wide registry (cached) rebuilt before and after a CLI run with its own DRAFTSMITH_SPEC_PATH."""
    draftsmith.default_registry.cache_clear()
    yield
    draftsmith.default_registry.cache_clear()


def registry(*folders):
    return draftsmith.build_registry(entry_points=False, spec_path=os.pathsep.join(map(str, folders)))


@pytest.mark.parametrize("name", ["mine.yaml", "fam.yml"])
def test_a_folder_spec_named_like_a_yaml_file_is_skipped_saying_why(tmp_path, name):
    """Skipped, said, like a file whose name cannot be read: one such file stops no other spec."""
    path = family(tmp_path / "specs", name=name, file="any.yaml")
    family(tmp_path / "specs", name="fine", file="fine.yaml")
    reg = registry(tmp_path / "specs")
    assert "fine" in reg.specs and name not in reg.specs
    ((skipped, why),) = reg.skipped_spec_files
    assert skipped == path and f"its name: {name!r} ends in" in why and "read as a file path" in why
    assert f"write name: {name.rsplit('.', 1)[0]!r}" in why


def test_list_says_so_and_never_loads_a_file_of_the_working_directory(tmp_path, monkeypatch, fresh):
    family(tmp_path / "specs", name="mine.yaml", file="real.yaml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("name: [broken\n")   # what `list` read before: ./mine.yaml
    res = CliRunner().invoke(app, ["list"], env={SPEC_PATH: str(tmp_path / "specs"), "COLUMNS": "1000"})
    assert res.exit_code == 1 and "real.yaml" in res.output and "skipped" in res.output, res.output
    assert "its name: 'mine.yaml' ends in .yaml" in res.output and "not valid YAML" not in res.output


def test_a_symlink_to_a_sibling_file_is_one_spec_not_a_clash(tmp_path, fresh):
    folder = tmp_path / "specs"
    path = family(folder, file="b.yaml")
    (folder / "a.yaml").symlink_to(path.name)                # a relative link to its sibling
    reg = registry(folder)
    assert reg.specs["myfamily"].record.path == folder / "a.yaml"   # registered once, under the path read first
    assert draftsmith.load_spec("myfamily", registry=reg).name == "myfamily"
    res = CliRunner().invoke(app, ["validate", "myfamily"], env={SPEC_PATH: str(folder), "COLUMNS": "1000"})
    assert res.exit_code == 0 and "provided twice" not in res.output, res.output


def test_a_symlink_to_a_file_of_another_folder_of_the_path_is_one_spec(tmp_path):
    path = family(tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "link.yaml").symlink_to(path)
    reg = registry(tmp_path / "a", tmp_path / "b")
    assert reg.specs["myfamily"].plugin == str(tmp_path / "a")


def test_two_files_with_one_name_still_clash(tmp_path):
    family(tmp_path / "specs", file="a.yaml")
    family(tmp_path / "specs", file="b.yaml")
    with pytest.raises(draftsmith.registry.PluginClash, match="provided twice"):
        registry(tmp_path / "specs").spec_source("myfamily")


@pytest.mark.parametrize("entry", ["~/specs", "~"])
def test_a_tilde_in_an_entry_is_expanded_even_quoted(tmp_path, monkeypatch, entry):
    monkeypatch.setenv("HOME", str(tmp_path))
    family(tmp_path / "specs")
    expected = tmp_path / entry[2:] if entry != "~" else tmp_path
    assert spec_folders(os.pathsep.join(["", entry])) == [expected]
    if entry == "~/specs":
        assert "myfamily" in registry(entry).specs


def test_an_entry_named_with_a_tilde_that_is_not_there_names_the_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(draftsmith.errors.NotFound, match=f"^{SPEC_PATH} names ~/nowhere, which does not exist"):
        spec_folders("~/nowhere")
