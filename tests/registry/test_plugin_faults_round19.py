"""What a plugin author's dogfooding found (2026-11-30): a plugin calling draftsmith at import time left the
process-wide registry without it, silently; SystemExit from a plugin (a version guard, an argparse at module level)
ended every command with the plugin's own text; a name taken from a built-in and a failing layout detector gave no
way out; a plugin factory's failure got a note steering the user off the plugin's spec."""
import sys
import textwrap

import pytest

import draftsmith
from draftsmith.hooks import Component, LayoutMatch, SpecSource, hookimpl
from draftsmith.registry import ComponentFailed, PluginClash, PluginError
from draftsmith.registry import registry as registry_module

from test_plugin_mistakes import OffsetParams, pair, spec_file   # noqa: F401 (pair: a fixture)
from test_plugins import Plugin, fresh

WAY_OUT = "or set DRAFTSMITH_DISABLE_PLUGINS={name} to load draftsmith without it"


def distribution(root, request, monkeypatch, source: str, name: str) -> None:
    """An installed-looking distribution ``ds-{name}`` whose entry point ``name`` is a module holding ``source``."""
    module = f"ds_round19_{name}_{abs(hash(str(root)))}"
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"ds_{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ds-{name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[draftsmith]\n{name} = {module}\n")
    request.addfinalizer(lambda: sys.modules.pop(module, None))
    monkeypatch.syspath_prepend(str(root))


@pytest.fixture
def default_cleared(request):
    registry_module.default_registry.cache_clear()
    request.addfinalizer(registry_module.default_registry.cache_clear)


def test_a_plugin_using_the_registry_at_import_is_told_to_call_it_in_its_hooks(tmp_path, request, monkeypatch,
                                                                                default_cleared):
    distribution(tmp_path, request, monkeypatch, """
        import draftsmith
        BASE = draftsmith.load_spec("eagle3-llama")
    """, "reent")
    for _ in range(2):   # the process-wide registry too, and the same answer each time (nothing half-built kept)
        with pytest.raises(PluginError) as e:
            draftsmith.list_specs()
        said = str(e.value)
        assert "plugin 'reent' (entry point reent = ds_round19_reent" in said, said
        assert "uses draftsmith's registry while it is being imported" in said and "call draftsmith inside its hooks" \
            in said and WAY_OUT.format(name="reent") in said, said
        assert e.value.plugin == "reent"
    monkeypatch.setenv("DRAFTSMITH_DISABLE_PLUGINS", "reent")
    registry_module.default_registry.cache_clear()
    assert "eagle3-llama" in draftsmith.list_specs()


def test_a_registry_built_in_another_thread_during_an_import_is_not_refused():
    import threading

    from draftsmith.registry import loading

    loading._importing.who = "plugin 'x'"
    try:
        built = []
        thread = threading.Thread(target=lambda: built.append(draftsmith.build_registry(entry_points=False)))
        thread.start()
        thread.join()
        assert built
        with pytest.raises(PluginError, match="plugin 'x' uses draftsmith's registry"):
            draftsmith.build_registry(entry_points=False)
    finally:
        loading._importing.who = None


@pytest.mark.parametrize("source, said", [
    ("import sys\nsys.exit('ds-exit needs torch >= 9.0')\n",
     "cannot be imported: SystemExit: ds-exit needs torch >= 9.0"),
    ("import argparse\nargparse.ArgumentParser(prog='ds_exit').parse_args(['--nope'])\n",
     "cannot be imported: SystemExit: 2"),
    ("import sys\nfrom draftsmith.hooks import hookimpl\n\n@hookimpl\ndef draftsmith_components():\n"
     "    sys.exit('no components today')\n",
     "draftsmith_components of plugin 'exiting' raised SystemExit: no components today"),
])
def test_a_plugin_ending_the_process_is_said_as_its_failure(source, said, tmp_path, request, monkeypatch):
    distribution(tmp_path, request, monkeypatch, source, "exiting")
    with pytest.raises(PluginError) as e:
        draftsmith.build_registry().components   # noqa: B018
    assert said in str(e.value) and WAY_OUT.format(name="exiting") in str(e.value), str(e.value)


@pytest.mark.parametrize("hook, said", [
    ("""
        @hookimpl
        def draftsmith_components():
            return [Component("norm", "rms", lambda params, *, dim, eps: None, doc="")]
     """, "norm 'rms' is provided by both plugin 'builtin' and plugin 'taker'"),
    ("""
        @hookimpl
        def draftsmith_specs():
            return [SpecSource("eagle3-llama", BUILTIN_DIR / "eagle3-llama.yaml")]
     """, "spec 'eagle3-llama' is provided by both plugin 'builtin' and plugin 'taker'"),
])
def test_a_name_taken_from_a_built_in_says_the_way_out(hook, said, tmp_path, request, monkeypatch):
    distribution(tmp_path, request, monkeypatch, "from draftsmith.hooks import Component, SpecSource, hookimpl\n"
                 "from draftsmith.specs.catalog import BUILTIN_DIR\n" + textwrap.dedent(hook), "taker")
    with pytest.raises(PluginClash) as e:
        draftsmith.build_registry().components   # noqa: B018
    assert said in str(e.value) and WAY_OUT.format(name="taker") in str(e.value), str(e.value)
    assert e.value.plugin == "taker"


@pytest.mark.parametrize("answer, said", [
    ("[][0]", "draftsmith_detect_layout of plugin 'detector' raised IndexError"),
    ("LayoutMatch('nobody', 'a reason')", "answered spec 'nobody', which no plugin provides"),
])
def test_a_failing_detector_says_the_way_out(answer, said, tmp_path, request, monkeypatch):
    distribution(tmp_path, request, monkeypatch, f"""
        from draftsmith.hooks import LayoutMatch, hookimpl

        @hookimpl
        def draftsmith_detect_layout(config, tensor_names):
            return {answer}
    """, "detector")
    with pytest.raises(PluginError) as e:
        draftsmith.build_registry().detect_layout({}, ["fc.weight"])
    assert said in str(e.value) and WAY_OUT.format(name="detector") in str(e.value), str(e.value)
    assert str(e.value).count("DRAFTSMITH_DISABLE_PLUGINS") == 1


def test_a_plugin_factorys_failure_gets_no_checkpoint_notes(tmp_path, pair):   # noqa: F811
    def offset_rms(params, *, dim, eps):
        raise ValueError("offset must be in [0, 1]")

    reg = fresh(("offsetnorm", Plugin([Component("norm", "offset_rms", offset_rms, OffsetParams)],
                                      [SpecSource("plug-draft", spec_file(tmp_path, {"kind": "offset_rms"}))])))
    with pytest.raises(ComponentFailed, match="failed to build: ValueError") as e:
        draftsmith.assemble("plug-draft", target=pair[0], draft=pair[1], registry=reg)
    assert not getattr(e.value, "__notes__", None), e.value.__notes__


def test_a_misfit_under_a_plugin_spec_still_gets_the_detected_note(tmp_path, pair):   # noqa: F811
    reg = fresh(("offsetnorm", Plugin([], [SpecSource("plug-draft", spec_file(tmp_path, {"kind": "rms"},
                                                                               rules=[]))])))
    with pytest.raises(Exception) as e:
        draftsmith.assemble("plug-draft", target=pair[0], draft=pair[1], registry=reg)
    assert "detected as eagle3-llama" in " ".join(getattr(e.value, "__notes__", [])), (str(e.value), e.value)


LayoutMatch, hookimpl   # noqa: B018 (names the detector sources import)
