"""Round 25 mutation kills for draftsmith/registry/loading.py: pluggy's refusal of a plugin's hook, quoted in the
PluginError, is kept whole up to 500 characters and cut to at most 500 past that (register_plugin's short_text); an
installed plugin's import failure likewise at 300 (load_entry_points)."""
import re

import pytest

import draftsmith
from draftsmith.hooks import hookimpl
from draftsmith.registry import PluginError
from test_entry_points import fake_distribution

QUOTED = re.compile(r"does not fit draftsmith's hooks: (.*)\. It is called as draftsmith_detect_layout\(config, "
                    r"tensor_names\)\.")


def _quoted(name: str, arg: int) -> str:
    """pluggy's text as the PluginError quotes it, for plugin ``name`` whose detector takes an unknown argument of
    ``arg`` letters (pluggy says that argument twice, the name once)."""
    scope = {"hookimpl": hookimpl}
    exec(f"class P:\n    @hookimpl\n    def draftsmith_detect_layout(self, config, {'a' * arg}):\n"
         "        return None\n", scope)
    with pytest.raises(PluginError) as info:
        draftsmith.build_registry(plugins=[(name, scope["P"]())], entry_points=False)
    found = QUOTED.search(str(info.value))
    assert found, str(info.value)
    return found.group(1)


def _sized(size: int) -> str:
    """The quoted text of a plugin whose pluggy text is ``size`` characters long."""
    base = len(_quoted("p", 10))   # short: quoted whole
    extra = size - base
    return _quoted("p" + "q" * (extra % 2), 10 + extra // 2)


def test_a_pluggy_refusal_of_500_characters_is_quoted_whole():
    """500 characters (the limit) are quoted as pluggy says them, uncut."""
    text = _sized(500)
    assert len(text) == 500 and "..." not in text and text.endswith("can not be found in the hookspec"), text


def test_a_pluggy_refusal_past_500_characters_is_cut_to_500_at_most_keeping_both_ends():
    """501 characters and more are cut in the middle to at most 500, both ends kept (what pluggy refused, and why)."""
    for size in (501, 502, 700):
        text = _sized(size)
        assert len(text) <= 500 and "..." in text, (size, len(text))
        assert text.startswith("Plugin 'p") and text.endswith("can not be found in the hookspec"), text


def _import_failure(tmp_path, monkeypatch, request, size: int) -> str:
    """The text quoted from an installed plugin whose import raises a RuntimeError of ``size`` characters."""
    module = fake_distribution(tmp_path, request, dist="ds-loud")
    (tmp_path / f"{module}.py").write_text(f"raise RuntimeError('<' + 'x' * {size - 2} + '>')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("DRAFTSMITH_DISABLE_PLUGINS", raising=False)
    monkeypatch.delenv("DRAFTSMITH_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    with pytest.raises(PluginError) as info:
        draftsmith.build_registry()
    found = re.search(r"cannot be imported: RuntimeError: (.*?)(?: \(in \S+, line \d+\))?; fix or uninstall 'ds-loud'",
                      str(info.value))
    assert found, str(info.value)
    return found.group(1)


def test_a_plugin_import_error_of_300_characters_is_quoted_whole(tmp_path, monkeypatch, request):
    """An import failure's text of 300 characters (the limit) is quoted as raised, uncut."""
    text = _import_failure(tmp_path, monkeypatch, request, 300)
    assert text == "<" + "x" * 298 + ">"


@pytest.mark.parametrize("size", [301, 302, 5000])
def test_a_plugin_import_error_past_300_characters_is_cut_to_300_at_most(tmp_path, monkeypatch, request, size):
    """A longer text is cut in the middle to at most 300 characters, both ends kept."""
    text = _import_failure(tmp_path, monkeypatch, request, size)
    assert len(text) <= 300 and "..." in text and text.startswith("<x") and text.endswith("x>"), (size, len(text))
