"""Kills survivors of scripts/mutate.py on draftsmith/specs/loader.py (spec_path, spec_file, _regular)."""
import pytest

import draftsmith
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.specs.documents import SpecNotFound


@pytest.fixture
def registry():
    return draftsmith.build_registry(entry_points=False)


def test_a_bare_name_of_a_folder_in_the_working_directory_is_not_a_file(tmp_path, monkeypatch, registry):
    """spec_path's `if not p.is_file()` (a bare name, no folder in it, not registered, existing): `validate .` and
    `validate somefolder` say the folder is not a regular file (with the check inverted, the folder was returned as
    the spec's file)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "somefolder").mkdir()
    for ref in ("somefolder", "."):
        with pytest.raises(SpecNotFound) as err:
            draftsmith.load_spec(ref, registry=registry)
        assert str(err.value) == f"spec file {ref} is not a regular file (a spec is one YAML file)"


def test_a_bare_name_of_a_file_without_a_yaml_suffix_is_read(tmp_path, monkeypatch, registry):
    """... and a regular file named so is the spec (with the check inverted, it was 'not a regular file')."""
    monkeypatch.chdir(tmp_path)
    text = (BUILTIN_DIR / "eagle3-llama.yaml").read_text().replace("name: eagle3-llama", "name: myspec")
    (tmp_path / "myspec").write_text(text)
    assert draftsmith.load_spec("myspec", registry=registry).name == "myspec"


def test_an_unregistered_bare_name_that_is_a_dangling_link_is_said_as_a_link(tmp_path, monkeypatch, registry):
    """spec_path line 44 (`not registry.has_spec(..) and p.is_symlink()`): a link in the working directory that
    leads nowhere is a file's problem, not an unknown spec name."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(SpecNotFound) as err:
        draftsmith.load_spec("dangling", registry=registry)
    assert str(err.value) == "spec file dangling is a link that leads nowhere (to itself, or to no file)"


def test_a_registered_name_wins_over_a_link_of_that_name(tmp_path, monkeypatch, registry):
    """... and a registered name wins over a link of the same name in the working directory (line 44 with `not`
    dropped, and line 63's `as_path and p.is_symlink()` as `or`, read the link's file)."""
    monkeypatch.chdir(tmp_path)
    text = (BUILTIN_DIR / "eagle3-llama.yaml").read_text().replace("name: eagle3-llama", "name: other")
    (tmp_path / "other.yaml").write_text(text)
    (tmp_path / "demo").symlink_to(tmp_path / "other.yaml")
    assert draftsmith.load_spec("demo", registry=registry).name == "demo"


def test_a_folder_written_as_a_path_says_a_spec_is_one_yaml_file(tmp_path, registry):
    """spec_file line 63 (`as_path and p.is_symlink()` as `or`): a folder given as a path is said by spec_file's own
    message, with its hint, not _regular's."""
    with pytest.raises(SpecNotFound) as err:
        draftsmith.load_spec(str(tmp_path), registry=registry)
    assert str(err.value) == f"spec file {tmp_path} is not a regular file (a spec is one YAML file)"


def path_of(base, length, suffix=""):
    """A path under ``base`` of exactly ``length`` characters ending in ``suffix``, its names under 255 bytes."""
    path = str(base)
    while len(path) < length - len(suffix):
        path += "/" + "d" * min(100, length - len(suffix) - len(path) - 1)
    path += suffix
    assert len(path) == length, path
    return path


def shown(path, limit=300):
    half = (limit - 3) // 2
    return path if len(path) <= limit else f"{path[:half]}...{path[-half:]}"


@pytest.mark.parametrize("length", [300, 400])
def test_a_missing_spec_path_is_quoted_whole_up_to_300_characters(tmp_path, registry, length):
    """spec_file line 68: exactly 300 whole (kills 299), longer cut to 148 + '...' + 148 (kills 301)."""
    path = path_of(tmp_path, length)
    with pytest.raises(SpecNotFound) as err:
        draftsmith.load_spec(path, registry=registry)
    assert str(err.value) == f"spec file {shown(path)} does not exist"


@pytest.mark.parametrize("length", [300, 400])
def test_a_folder_spec_path_is_quoted_whole_up_to_300_characters(tmp_path, registry, length):
    """spec_file line 70."""
    path = path_of(tmp_path, length)
    import os

    os.makedirs(path)
    with pytest.raises(SpecNotFound) as err:
        draftsmith.load_spec(path, registry=registry)
    assert str(err.value) == f"spec file {shown(path)} is not a regular file (a spec is one YAML file)"


@pytest.mark.parametrize("length", [300, 400])
def test_a_missing_yaml_file_is_quoted_whole_up_to_300_characters(tmp_path, registry, length):
    """_regular line 79 (a .yaml name)."""
    path = path_of(tmp_path, length, ".yaml")
    with pytest.raises(SpecNotFound) as err:
        draftsmith.load_spec(path, registry=registry)
    assert str(err.value) == f"spec file {shown(path)} does not exist"


@pytest.mark.parametrize("count", [150, 200])
def test_a_bare_folder_name_is_quoted_whole_up_to_300_characters(tmp_path, monkeypatch, registry, count):
    """spec_path line 49: a bare name is at most 255 bytes, so only control characters (each shown as two, '\\t')
    make it longer than 300: 150 tabs are shown whole (kills 299), 200 cut to 148 + '...' + 148 (kills 301)."""
    monkeypatch.chdir(tmp_path)
    name = "\t" * count
    (tmp_path / name).mkdir()
    with pytest.raises(SpecNotFound) as err:
        draftsmith.load_spec(name, registry=registry)
    escaped = "\\t" * count
    assert str(err.value) == f"spec file {shown(escaped)} is not a regular file (a spec is one YAML file)"
