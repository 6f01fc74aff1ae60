"""A spec name that files of DRAFTSMITH_SPEC_PATH give to more than one spec (with a built-in or a plugin's, or with one
another) is never shadowed and never stops a command that does not ask for it: looking that name up (load_spec,
--spec, validate) is the clash naming every file, `draftsmith list` shows it broken, and every other spec works.
Two plugins' clashes (code, not a user's folder) still fail when the registry is built (tests/registry/
test_plugins.py)."""
import os

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.hooks import LayoutMatch, SpecSource, hookimpl
from draftsmith.registry import PluginClash, PluginError
from draftsmith.registry.spec_path import SPEC_PATH
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_target
from test_spec_path import family   # a valid spec file in a folder, shared


def registry(*folders, plugins=()):
    return draftsmith.build_registry(plugins, entry_points=False, spec_path=os.pathsep.join(map(str, folders)))


@pytest.fixture
def clashing(tmp_path):
    """Folders 'one' and 'two' both naming a spec 'twin'; 'two' also has 'eagle3.1-llama' (a built-in's name) and an
    unrelated 'myfamily'. The path as DRAFTSMITH_SPEC_PATH lists it, and the clashing files."""
    a, b = family(tmp_path / "one", "twin"), family(tmp_path / "two", "twin", file="other.yaml")
    builtin = family(tmp_path / "two", "eagle3.1-llama", file="e31.yaml")
    family(tmp_path / "two", "myfamily")
    return os.pathsep.join([str(tmp_path / "one"), str(tmp_path / "two")]), a, b, builtin


@pytest.fixture
def fresh():
    draftsmith.default_registry.cache_clear()
    yield
    draftsmith.default_registry.cache_clear()


def test_unrelated_specs_load_while_two_folders_clash_on_another_name(clashing):
    path, *_ = clashing
    reg = draftsmith.build_registry(entry_points=False, spec_path=path)   # no error: nothing asked for 'twin'
    assert draftsmith.load_spec("myfamily", registry=reg).name == "myfamily"
    assert draftsmith.load_spec("eagle3-llama", registry=reg).name == "eagle3-llama"   # a built-in
    assert {"twin", "eagle3.1-llama", "myfamily", "demo"} <= set(draftsmith.list_specs(reg))
    assert "twin" not in reg.specs and "eagle3.1-llama" not in reg.specs   # never one of the two, silently


def test_the_clashing_name_is_refused_naming_both_files(clashing):
    path, a, b, builtin = clashing
    reg = draftsmith.build_registry(entry_points=False, spec_path=path)
    with pytest.raises(PluginClash) as info:
        draftsmith.load_spec("twin", registry=reg)
    text = str(info.value)
    assert text.startswith("spec 'twin' is provided by both folder ") and f"in {a} and {b}; " in text, text
    with pytest.raises(PluginClash) as info:
        draftsmith.load_spec("eagle3.1-llama", registry=reg)
    assert f"in {BUILTIN_DIR / 'eagle3.1-llama.yaml'} and {builtin}; change the name: in {builtin} " in str(info.value)


def test_a_file_named_as_the_clashing_spec_in_the_working_directory_is_not_loaded_instead(clashing, tmp_path,
                                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "twin").write_text("name: [broken\n")
    with pytest.raises(PluginClash, match="^spec 'twin' is provided by both"):
        draftsmith.load_spec("twin", registry=registry(*clashing[0].split(os.pathsep)))


def test_three_files_are_all_named_and_a_symlink_adds_none(tmp_path):
    a, b = family(tmp_path / "one", "twin"), family(tmp_path / "two", "twin")
    c = family(tmp_path / "two", "twin", file="zz.yaml")
    (tmp_path / "two" / "zzz-link.yaml").symlink_to(a)   # file a again: the same spec, not a fourth
    with pytest.raises(PluginClash) as info:
        registry(tmp_path / "one", tmp_path / "two").spec_source("twin")
    assert str(info.value).startswith(f"spec 'twin' is provided by both folder '{tmp_path / 'one'}' of {SPEC_PATH} "
                                      f"and folder '{tmp_path / 'two'}' of {SPEC_PATH}, in {a}, {b} and {c}; change "
                                      "the name: in all but one of them ("), str(info.value)


def test_a_folder_clashing_with_a_plugin_leaves_the_plugin_working(tmp_path):
    theirs = family(tmp_path / "plugin", "theirs")
    mine = family(tmp_path / "specs", "theirs")

    class Plugin:
        @hookimpl
        def draftsmith_specs(self):
            return [SpecSource("theirs", theirs)]

        @hookimpl
        def draftsmith_detect_layout(self, config, tensor_names):
            return LayoutMatch("theirs", "its names")

    reg = registry(tmp_path / "specs", plugins=[("p", Plugin())])
    assert reg.spec_names()[[n for n, _ in reg.spec_names()].index("theirs")] == ("theirs", f"p, {tmp_path / 'specs'}")
    match = reg.detect_layout({}, [])   # a detector naming it answers it (loading it says the clash)
    assert match is not None and match.spec == "theirs" and match.plugin == "p"
    with pytest.raises(PluginClash, match=f"provided by both plugin 'p' and folder .* change the name: in {mine} "):
        draftsmith.load_spec(match.spec, registry=reg)


def test_a_detector_naming_no_spec_still_lists_the_clashing_names_as_known(tmp_path):
    family(tmp_path / "a", "twin"), family(tmp_path / "b", "twin")

    class Plugin:
        @hookimpl
        def draftsmith_detect_layout(self, config, tensor_names):
            return LayoutMatch("twinn", "a typo")

    with pytest.raises(PluginError, match=r"answered spec 'twinn', which no plugin provides\. Did you mean 'twin'\?"):
        registry(tmp_path / "a", tmp_path / "b", plugins=[("p", Plugin())]).detect_layout({}, [])


def spec_rows(stdout: str) -> dict[str, list[str]]:
    """`draftsmith list`'s specs table: name -> [plugin, description], the lines of a folded row joined by spaces."""
    rows: dict[str, list[str]] = {}
    name = ""
    for line in stdout.split("components")[0].splitlines():
        if "│" in line:
            first, *cells = [c.strip() for c in line.split("│")[1:-1]]
            name = first or name
            rows[name] = [" ".join(filter(None, pair)) for pair in zip(rows.get(name, ["", ""]), cells)]
    return rows


def test_list_shows_the_clash_as_broken_and_the_rest_as_usual(clashing, fresh):
    path, a, b, _ = clashing
    res = CliRunner().invoke(app, ["list"], env={SPEC_PATH: path, "COLUMNS": "1000"})
    assert res.exit_code == 1, res.output
    rows = spec_rows(res.stdout)
    assert rows["twin"][0].replace(" ", "") == f"{a.parent},{b.parent}"   # both folders (a fold adds a space)
    assert rows["twin"][1].startswith("BROKEN: spec 'twin' is provided by both folder"), rows["twin"]
    assert rows["eagle3.1-llama"][1].startswith("BROKEN: spec 'eagle3.1-llama' is provided by both plugin "
                                                "'builtin'"), rows["eagle3.1-llama"]
    assert not rows["myfamily"][1].startswith("BROKEN") and not rows["demo"][1].startswith("BROKEN")
    assert "components" in res.stdout and f"in {a} and {b}; change the name: in one of them" in res.stderr
    assert f"{BUILTIN_DIR / 'eagle3.1-llama.yaml'} and {clashing[3]}; change the name: in" in res.stderr


def test_commands_on_other_specs_run_and_the_clashing_name_says_the_clash(clashing, tmp_path, fresh):
    env = {SPEC_PATH: clashing[0], "COLUMNS": "1000"}
    res = CliRunner().invoke(app, ["validate", "myfamily", "demo", "twin"], env=env)
    assert res.exit_code == 1 and "ok (myfamily, from folder " in res.output and "ok (demo)" in res.output, res.output
    assert "spec 'twin' is provided by both folder" in res.output
    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    draft = write_eagle3(tmp_path / "d", target)
    res = CliRunner().invoke(app, ["generate", "--spec", "eagle3-llama", "--target", str(target), "--draft",
                                   str(draft), "--token-ids", "1,2,3", "--max-new-tokens", "4", "--no-compare"],
                             env=env)
    assert res.exit_code == 0 and "spec eagle3-llama:" in res.stdout, res.output
