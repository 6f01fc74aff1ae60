"""Round 25 mutation kills for draftsmith/registry/registry.py: what its surviving mutants showed untested (a clash of
many spec files cut to five named files, the defaults of a Registry built by hand, a reads answer keyed by other than
field names, the plural of two disabled plugins, and the 300-character cut of a plugin's error or a spec file's path
in a message: whole up to 300, cut to at most 300 past it)."""
import importlib
import os
import re

import pluggy
import pytest
from pydantic import BaseModel, ConfigDict

import draftsmith
from draftsmith.hooks import PROJECT, Component, SpecSource, hookimpl
from draftsmith.hooks import specs as hookspecs
from draftsmith.registry import ComponentFailed, PluginClash, PluginError, Registry, UnknownComponent
from draftsmith.registry.registry import UnknownSpec
from test_component_holds import Plugin   # a plugin of the given components
from test_entry_points import fake_distribution   # an installed-looking distribution on sys.path
from test_spec_path import family   # a valid spec file in a folder, shared


def _clash(tmp_path, folders: int) -> tuple[str, list]:
    """The message of spec 'twin' that ``folders`` folders each give, and their files."""
    files = [family(tmp_path / f"f{i}", "twin") for i in range(folders)]
    reg = draftsmith.build_registry(entry_points=False,
                                    spec_path=os.pathsep.join(str(f.parent) for f in files))
    with pytest.raises(PluginClash) as info:
        reg.spec_source("twin")
    return str(info.value), files


def test_a_clash_of_five_files_names_all_five(tmp_path):
    """Five files of one name are all named, 'a, b, c, d and e' (no 'and 0 more'): _and cuts past five only."""
    text, files = _clash(tmp_path, 5)
    listed = ", ".join(map(str, files[:4])) + f" and {files[4]}"
    assert f"in {listed}; change the name: in all but one of them" in text, text
    assert "more" not in text, text


def test_a_clash_of_six_files_names_five_and_counts_the_rest(tmp_path):
    """Six files of one name: the first five named, 'and 1 more' (a message stays readable however many clash)."""
    text, files = _clash(tmp_path, 6)
    assert f"in {', '.join(map(str, files[:5]))} and 1 more; change the name" in text, text
    assert str(files[5]) not in text, text
    whos = ", ".join(f"folder {str(f.parent)!r} of DRAFTSMITH_SPEC_PATH" for f in files[:5])
    assert text.startswith(f"spec 'twin' is provided by {whos} and 1 more, in "), text


class BadComponent:
    @hookimpl
    def draftsmith_components(self):
        return [Component("norm", "", lambda params, *, dim, eps: None)]


def _pm(*plugins):
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(importlib.import_module("draftsmith.builtin"), name="builtin")
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    return pm


def test_a_registry_built_by_hand_collects_its_components_at_once():
    """Registry(pm) is eager by default (lazy=False): a plugin's component mistake is raised where it is built."""
    with pytest.raises(PluginError, match=r"draftsmith_components of plugin 'bad' returned a list whose item 0"):
        Registry(_pm(("bad", BadComponent())))
    Registry(_pm(("bad", BadComponent())), lazy=True)   # lazy: said on first use instead


def test_a_registry_built_by_hand_does_not_say_autoloading_was_disabled():
    """Registry(pm) defaults to autoload_off=False: an unknown name says no note about
    DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD (nothing disabled it)."""
    reg = Registry(_pm())
    assert reg.not_loaded_note() == ""
    with pytest.raises(UnknownComponent) as info:
        reg.get("norm", "nope")
    assert "autoloading" not in str(info.value) and str(info.value).endswith(")"), str(info.value)


def _deep_file(root, total: int, name="mine.yaml"):
    """The folder under ``root`` in which file ``name`` has a path of exactly ``total`` characters."""
    folder, left = root, total - len(str(root)) - 1 - len(name)   # characters of '/'-led folders still to add
    while left > 0:
        take = min(101, left) - (left - min(101, left) == 1)   # '/' and up to 100 letters; never leave one over
        folder, left = folder / ("d" * (take - 1)), left - take
    assert len(str(folder / name)) == total
    return folder


def _clash_files(tmp_path, size: int) -> list[str]:
    """The files a clash of spec 'twin' names, the first at a path of ``size`` characters."""
    deep = _deep_file(tmp_path / "a", size)
    family(deep, "twin"), family(tmp_path / "b", "twin")
    reg = draftsmith.build_registry(entry_points=False, spec_path=os.pathsep.join([str(deep), str(tmp_path / "b")]))
    with pytest.raises(PluginClash) as info:
        reg.spec_source("twin")
    found = re.search(r"DRAFTSMITH_SPEC_PATH, in (.*) and (.*); change the name", str(info.value))
    assert found, str(info.value)
    return [found.group(1), found.group(2)]


def test_a_clashing_file_path_of_300_characters_is_named_whole(tmp_path):
    """A clash names each file's path whole up to 300 characters."""
    first, second = _clash_files(tmp_path, 300)
    assert len(first) == 300 and "..." not in first and first.endswith("/mine.yaml"), first
    assert second == str(tmp_path / "b" / "mine.yaml")


@pytest.mark.parametrize("size", [301, 302, 420])
def test_a_clashing_file_path_past_300_characters_is_cut_to_300_keeping_its_file_name(tmp_path, size):
    """A longer path is cut in the middle to at most 300 characters; its file name is kept."""
    first, _ = _clash_files(tmp_path, size)
    assert len(first) <= 300 and "..." in first and first.endswith("/mine.yaml"), (size, len(first))


class Gate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gate: bool | None = None


@pytest.mark.parametrize("answer", [{1: True}, ["ab"]])
def test_a_reads_answer_with_keys_that_are_no_field_names_is_refused(answer):
    """Registry.reads: a mapping with a non-str key, or a list of two-letter strings (dict() would take it as pairs),
    is 'not a mapping of field names to values', a ComponentFailed naming the plugin: both conditions must hold."""
    comp = Component("fusion", "gated", lambda params, **_: None, Gate, reads=lambda params, cfg: answer)
    reg = draftsmith.build_registry(plugins=[("gateplugin", Plugin(comp))], entry_points=False)
    with pytest.raises(ComponentFailed, match=r"^fusion 'gated' \(plugin 'gateplugin'\): reads\(params, draft_config\) "
                                              r"failed: TypeError: returned .*, not a mapping of field names to "
                                              r"values$"):
        reg.reads("fusion", "gated", Gate(), {})


def test_two_disabled_plugins_are_said_in_the_plural(tmp_path, monkeypatch, request):
    """Registry.not_loaded_note: two installed plugins DRAFTSMITH_DISABLE_PLUGINS keeps out are 'the installed
    plugins 'one', 'two'' and 'remove them ... to load them' (the plural starts at two, not three)."""
    for name in ("one", "two"):
        fake_distribution(tmp_path / name, request, dist=f"ds-{name}", ep_name=name, norm=f"norm-{name}")
        monkeypatch.syspath_prepend(str(tmp_path / name))
    monkeypatch.delenv("DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("DRAFTSMITH_DISABLE_PLUGINS", "two,one")
    with pytest.raises(UnknownComponent) as info:
        draftsmith.build_registry().get("norm", "norm-one")
    assert str(info.value).endswith(". DRAFTSMITH_DISABLE_PLUGINS keeps the installed plugins 'one', 'two' out, which "
                                    "may provide it; remove them from DRAFTSMITH_DISABLE_PLUGINS to load them."), \
        str(info.value)


def _loud(size: int):
    """A callable raising a RuntimeError of ``size`` characters, '<xxx...>', whatever it is given."""
    def raise_it(*_, **__):
        raise RuntimeError("<" + "x" * (size - 2) + ">")
    return raise_it


class LoudDetector:
    def __init__(self, size):
        self.size = size

    @hookimpl
    def draftsmith_detect_layout(self, config, tensor_names):
        _loud(self.size)()


def _quoted(where: str, size: int) -> str:
    """What a plugin's RuntimeError of ``size`` characters is quoted as, raised by ``where``: its factory (build), its
    holds (holds) or its layout detector (detect)."""
    comp = Component("fusion", "loud", _loud(size), holds=_loud(size))
    reg = draftsmith.build_registry(plugins=[("loudplugin", Plugin(comp)), ("detector", LoudDetector(size))],
                                    entry_points=False)
    if where == "build":
        with pytest.raises(ComponentFailed) as info:
            reg.build("fusion", "loud", None)
        found = re.search(r"failed to build: RuntimeError: (.*?)(?: \(in \S+, line \d+\))?; the assembler calls it as",
                          str(info.value))
    elif where == "holds":
        with pytest.raises(ComponentFailed) as info:
            reg.holds("fusion", "loud", {}, ())
        found = re.search(r"holds\(params\) failed: RuntimeError: (.*?)(?: \(in \S+, line \d+\))?$", str(info.value))
    else:
        with pytest.raises(PluginError) as info:
            reg.detect_layout({}, [])
        found = re.search(r"^draftsmith_detect_layout of plugin 'detector' raised RuntimeError: (.*?)"
                          r"(?: \(in \S+, line \d+\))?$",
                          str(info.value))
    assert found, str(info.value)
    return found.group(1)


@pytest.mark.parametrize("where", ["build", "holds", "detect"])
def test_a_plugins_error_of_300_characters_is_quoted_whole(where):
    """Registry.build, Registry._answered and Registry._asked quote a plugin's error whole up to 300 characters."""
    assert _quoted(where, 300) == "<" + "x" * 298 + ">"


@pytest.mark.parametrize("size", [301, 302, 4000])
@pytest.mark.parametrize("where", ["build", "holds", "detect"])
def test_a_plugins_longer_error_is_cut_to_300_keeping_both_ends(where, size):
    """Past 300 characters it is cut in the middle to at most 300, both ends kept."""
    text = _quoted(where, size)
    assert len(text) <= 300 and "..." in text and text.startswith("<x") and text.endswith("x>"), (size, len(text))


class SpecPlugin:
    """A plugin registering the spec file ``path`` as ``name``."""

    def __init__(self, name, path):
        self.name, self.path = name, path

    @hookimpl
    def draftsmith_specs(self):
        return [SpecSource(self.name, self.path)]


def _noted(tmp_path, why: str, size: int) -> str:
    """The path an UnknownSpec's note names for a file at a path of ``size`` characters: 'skipped', a file of a
    DRAFTSMITH_SPEC_PATH folder whose name: cannot be read; 'misnamed', a plugin's spec whose file says the name asked
    while its SpecSource registers another."""
    deep = _deep_file(tmp_path / "d", size, name="ghost.yaml")
    if why == "skipped":
        deep.mkdir(parents=True)
        (deep / "ghost.yaml").write_text("other: 1\n")
        reg = draftsmith.build_registry(entry_points=False, spec_path=str(deep))
        pattern = r"\nnote: (.*) in DRAFTSMITH_SPEC_PATH was skipped: "
    else:
        family(deep, "ghost", file="ghost.yaml")
        reg = draftsmith.build_registry([("acme", SpecPlugin("acme-other", deep / "ghost.yaml"))],
                                        entry_points=False, spec_path="")
        pattern = r"\nnote: (.*) says name: 'ghost', but plugin 'acme' registers it as 'acme-other'"
    with pytest.raises(UnknownSpec) as info:
        reg.spec_source("ghost")
    found = re.search(pattern, str(info.value))
    assert found, str(info.value)
    return found.group(1)


@pytest.mark.parametrize("why", ["skipped", "misnamed"])
def test_a_noted_spec_file_path_of_300_characters_is_named_whole(tmp_path, why):
    """Registry.spec_source's notes name a spec file's path whole up to 300 characters."""
    text = _noted(tmp_path, why, 300)
    assert len(text) == 300 and text.endswith("/ghost.yaml") and "..." not in text, text


@pytest.mark.parametrize("size", [301, 302, 420])
@pytest.mark.parametrize("why", ["skipped", "misnamed"])
def test_a_noted_longer_spec_file_path_is_cut_to_300_keeping_its_file_name(tmp_path, why, size):
    """Past 300 characters the path is cut in the middle to at most 300; its file name is kept."""
    text = _noted(tmp_path, why, size)
    assert len(text) <= 300 and "..." in text and text.endswith("/ghost.yaml"), (size, len(text))
