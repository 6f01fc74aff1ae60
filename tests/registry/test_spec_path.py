"""DRAFTSMITH_SPEC_PATH: folders of YAML specs, named by their `name:`, found by load_spec, `--spec NAME` and
`draftsmith list` (with their folder as provider) with no Python plugin; a name taken twice is an error naming both
files where that name is looked up (tests/registry/test_spec_clashes.py: nowhere else); the files stay data."""
import os

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.errors import NotFound
from draftsmith.registry import PluginClash
from draftsmith.registry.spec_path import SPEC_PATH, declared_name
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_target

LLAMA = (BUILTIN_DIR / "eagle3-llama.yaml").read_text()


def family(folder, name="myfamily", file="mine.yaml"):
    """The built-in eagle3-llama renamed: a valid spec in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(LLAMA.replace("name: eagle3-llama", f"name: {name}", 1))
    return path


def registry(*folders):
    return draftsmith.build_registry(entry_points=False, spec_path=os.pathsep.join(map(str, folders)))


def test_a_spec_in_a_folder_of_the_path_is_loaded_by_its_name(tmp_path):
    folder = tmp_path / "specs"
    path = family(folder, file="any-file-name.yaml")
    (folder / "notes.yaml").write_text("just: data\n")        # no name: not a spec
    (folder / "README.md").write_text("name: readme\n")       # not YAML by its suffix
    reg = registry(folder)
    spec = draftsmith.load_spec("myfamily", registry=reg)
    assert spec.name == "myfamily" and spec.source == str(path)
    assert reg.specs["myfamily"].plugin == str(folder.absolute())
    assert ("myfamily", str(folder.absolute())) in reg.spec_names() and "eagle3-llama" in draftsmith.list_specs(reg)
    assert set(draftsmith.list_specs(reg)) == set(draftsmith.list_specs(registry())) | {"myfamily"}
    with pytest.raises(LookupError, match="no spec named 'myfamily'"):
        draftsmith.load_spec("myfamily", registry=registry())   # not on the path: unknown


def test_folders_are_separated_by_pathsep_and_empty_entries_are_skipped(tmp_path):
    family(tmp_path / "a", "fam-a")
    family(tmp_path / "b", "fam-b")
    value = os.pathsep.join(["", str(tmp_path / "a"), "", str(tmp_path / "b"), str(tmp_path / "a")])
    reg = draftsmith.build_registry(entry_points=False, spec_path=value)   # a folder named twice is one folder
    assert {n: reg.specs[n].plugin for n in ("fam-a", "fam-b")} == {"fam-a": str(tmp_path / "a"),
                                                                    "fam-b": str(tmp_path / "b")}


def test_a_folder_that_is_not_there_is_named(tmp_path):
    with pytest.raises(NotFound, match=f"^{SPEC_PATH} names .*nowhere, which does not exist"):
        registry(tmp_path / "nowhere")
    (tmp_path / "file").write_text("")
    with pytest.raises(NotFound, match=r"file, which is not a folder"):
        registry(tmp_path / "file")


def test_a_name_a_builtin_has_is_a_clash_naming_both_files(tmp_path):
    path = family(tmp_path / "specs", "eagle3-llama")
    reg = registry(tmp_path / "specs")     # built: the clash is said where the name is looked up
    with pytest.raises(PluginClash) as info:
        reg.spec_source("eagle3-llama")
    text = str(info.value)
    assert text.startswith(f"spec 'eagle3-llama' is provided by both plugin 'builtin' and folder "
                           f"'{tmp_path / 'specs'}' of {SPEC_PATH}, in ")
    assert str(BUILTIN_DIR / "eagle3-llama.yaml") in text and f"change the name: in {path} " in text
    assert text.endswith(f"(draftsmith never shadows silently; meanwhile `{SPEC_PATH}= draftsmith ...` runs a "
                         "command without these folders)")


def test_a_name_a_plugin_spec_has_is_a_clash(tmp_path):
    from draftsmith.hooks import SpecSource, hookimpl

    theirs = family(tmp_path / "plugin", "shared")

    class Plugin:
        @hookimpl
        def draftsmith_specs(self):
            return [SpecSource("shared", theirs)]

    mine = family(tmp_path / "specs", "shared")
    reg = draftsmith.build_registry([("p", Plugin())], entry_points=False, spec_path=str(tmp_path / "specs"))
    with pytest.raises(PluginClash, match=r"^spec 'shared' is provided by both plugin 'p' and folder .*"
                                          f"in {theirs} and {mine}; change the name: in {mine} "):
        draftsmith.load_spec("shared", registry=reg)


def test_a_name_two_files_have_is_a_clash_naming_both(tmp_path):
    a, b = family(tmp_path / "one", "twin"), family(tmp_path / "two", "twin")
    with pytest.raises(PluginClash, match=f"by both folder '{tmp_path / 'one'}' of {SPEC_PATH} and folder "
                                          f"'{tmp_path / 'two'}' of {SPEC_PATH}, in {a} and {b}; change the name: "
                                          "in one of them"):
        registry(tmp_path / "one", tmp_path / "two").spec_source("twin")
    c = family(tmp_path / "one", "twin", file="zz-copy.yaml")
    with pytest.raises(PluginClash, match=f"provided twice by folder '{tmp_path / 'one'}' of {SPEC_PATH}, in {a} and "
                                          f"{c}"):
        registry(tmp_path / "one").spec_source("twin")


def test_a_file_is_read_as_data_only(tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    marker = tmp_path / "ran"
    (folder / "evil.yaml").write_text(f"name: evil\ndraft: !!python/object/apply:os.system ['touch {marker}']\n")
    reg = registry(folder)                                     # registered by its name: nothing built
    with pytest.raises(draftsmith.SpecError, match="could not determine a constructor"):
        draftsmith.load_spec("evil", registry=reg)
    assert not marker.exists()


@pytest.mark.parametrize(("text", "name"), [
    ("name: foo\n", "foo"), ("draft: {name: x}\nname: 'bar'\n", "bar"), ("x: [1, {name: z}]\nname: ok\n", "ok"),
    ("name: 123\n", None), ("name:\n", None), ("- name: x\n", None), ("name: {a: 1}\n", None), ("", None),
    ("bad: [\nname: x\n", None), ("other: 1\n", None),
])
def test_the_name_is_the_top_level_string(tmp_path, text, name):
    (tmp_path / "s.yaml").write_text(text)
    assert declared_name(tmp_path / "s.yaml") == name


@pytest.fixture
def on_the_path(tmp_path):
    """DRAFTSMITH_SPEC_PATH naming a folder with 'myfamily'; the process-wide registry rebuilt before and after."""
    family(tmp_path / "specs")
    draftsmith.default_registry.cache_clear()
    yield {SPEC_PATH: str(tmp_path / "specs"), "COLUMNS": "1000"}
    draftsmith.default_registry.cache_clear()


def test_list_and_validate_find_the_users_spec_by_name(on_the_path, tmp_path):
    res = CliRunner().invoke(app, ["list"], env=on_the_path)
    assert res.exit_code == 0, res.output
    lines = [[c.strip() for c in line.split("│")[1:-1]] for line in res.stdout.splitlines() if "│" in line]
    first = next(i for i, cells in enumerate(lines) if cells[0] == "myfamily")
    rest = lines[first + 1:][: next(i for i, cells in enumerate(lines[first + 1:]) if cells[0])]
    assert "".join(cells[1] for cells in [lines[first], *rest]) == str(tmp_path / "specs")   # whole, if folded
    res = CliRunner().invoke(app, ["validate", "myfamily"], env=on_the_path)
    assert res.exit_code == 0 and "ok (myfamily, from folder " in res.output, res.output


def test_generate_takes_the_users_spec_by_name(on_the_path, tmp_path):
    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    draft = write_eagle3(tmp_path / "d", target)
    res = CliRunner().invoke(app, ["generate", "--spec", "myfamily", "--target", str(target), "--draft", str(draft),
                                   "--token-ids", "1,2,3", "--max-new-tokens", "4", "--no-compare"], env=on_the_path)
    assert res.exit_code == 0, res.output
    assert "spec myfamily:" in res.stdout and "speculative v" in res.stdout


def test_a_spec_file_of_exactly_the_size_limit_is_read_and_one_byte_more_is_not(tmp_path):
    # catches spec_path.py: st_size > SPEC_BYTES -> >= (a file at the stated bound, "at most", would lose its name)
    from draftsmith import limits

    head = "name: edge\n# "
    for size, want in ((limits.SPEC_BYTES, "edge"), (limits.SPEC_BYTES + 1, None)):
        path = tmp_path / f"s{size}.yaml"
        path.write_text(head + "x" * (size - len(head) - 1) + "\n")
        assert path.stat().st_size == size
        assert declared_name(path) == want
