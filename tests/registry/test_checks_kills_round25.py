"""Round 25 mutation kills for draftsmith/registry/checks.py: what a collecting hook returns instead of a list, and a
plugin's SpecSource name, said as the contract says them (not as an item of a string, or a later TypeError)."""
import re
from pathlib import Path

import pytest

import draftsmith
from draftsmith import limits
from draftsmith.hooks import SpecSource, hookimpl
from draftsmith.registry import PluginError


class Returns:
    """A plugin whose draftsmith_specs returns ``value`` as it is."""

    def __init__(self, value):
        self.value = value

    @hookimpl
    def draftsmith_specs(self):
        return self.value


def fresh(value):
    return draftsmith.build_registry(plugins=[("odd", Returns(value))], entry_points=False)


@pytest.mark.parametrize("value, shown", [
    ("my-spec", "'my-spec'"),          # a str is iterable: never read as a list of letters
    ({"name": "x"}, r"\{'name': 'x'\}"),   # a mapping: never read as a list of its keys
    (5, "5"),                          # not iterable: said as the contract, not as list()'s TypeError
])
def test_a_collecting_hook_that_returns_no_list_is_said_so(value, shown):
    """checks.collected: a str, a mapping or a non-iterable returned is 'returned X; it returns a list of ...' with X
    as short() quotes it (brief of a non-record), not an item of it or a TypeError the hook 'raised'."""
    with pytest.raises(PluginError, match=rf"^draftsmith_specs of plugin 'odd' returned {shown}; it returns a list of "
                                          r"draftsmith\.hooks\.SpecSource records$"):
        fresh(value)


@pytest.mark.parametrize("name", ["", "   ", None, 5])
def test_a_spec_source_without_a_string_name_is_told_the_name_must_be_one(name):
    """An empty, blank or non-string SpecSource name is 'the name must be a non-empty string' (neither the pattern's
    message nor an AttributeError of name.strip())."""
    with pytest.raises(PluginError, match=r"^draftsmith_specs of plugin 'odd' returned a list whose item 0 is "
                                          r"SpecSource\(.*\): the name must be a non-empty string \(draftsmith\."
                                          r"load_spec\(name\) finds the spec by it\)$"):
        fresh([SpecSource(name, Path("x.yaml"))])


def test_a_spec_source_name_of_exactly_the_limit_is_taken_and_one_more_is_refused(tmp_path):
    """limits.NAME_CHARS characters are a spec's name (a spec file may say it); one more is refused."""
    name = "a" * limits.NAME_CHARS
    assert fresh([SpecSource(name, tmp_path / "x.yaml")]).has_spec(name)
    with pytest.raises(PluginError, match=rf"the name must be one a spec file may give .* at most "
                                          rf"{limits.NAME_CHARS} characters"):
        fresh([SpecSource(name + "a", tmp_path / "x.yaml")])


class Raises:
    """A plugin whose draftsmith_specs raises a RuntimeError of ``size`` characters, '<xxx...>'."""

    def __init__(self, size):
        self.size = size

    @hookimpl
    def draftsmith_specs(self):
        raise RuntimeError("<" + "x" * (self.size - 2) + ">")


def _raised(size: int) -> str:
    with pytest.raises(PluginError) as info:
        draftsmith.build_registry(plugins=[("loud", Raises(size))], entry_points=False)
    prefix = "draftsmith_specs of plugin 'loud' raised RuntimeError: "
    assert str(info.value).startswith(prefix), str(info.value)
    return re.sub(r" \(in \S+, line \d+\)$", "", str(info.value).removeprefix(prefix))   # where it raised


def test_a_collecting_hooks_error_of_300_characters_is_quoted_whole():
    """checks.collected quotes what a hook raised whole up to 300 characters."""
    assert _raised(300) == "<" + "x" * 298 + ">"


@pytest.mark.parametrize("size", [301, 302, 4000])
def test_a_collecting_hooks_longer_error_is_cut_to_300_keeping_both_ends(size):
    """Past 300 characters it is cut in the middle to at most 300, both ends kept."""
    text = _raised(size)
    assert len(text) <= 300 and "..." in text and text.startswith("<x") and text.endswith("x>"), (size, len(text))
