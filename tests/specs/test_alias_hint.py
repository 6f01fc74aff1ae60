"""An alias that names no anchor: libyaml says "found undefined alias" without the name (a spec author's hunt,
2026-12-01); the hint names it and says how an anchor is defined."""
import pytest

from test_tab_indent_hint import problem   # the one problem a spec text gets


@pytest.mark.parametrize("value, name", [("*fus", "fus"), ("{kind: *eagle-3}", "eagle-3"), ("[*a, 1]", "a")])
def test_an_undefined_alias_is_named(tmp_path, value, name):
    p = problem(tmp_path, f"name: a\ndraft:\n  fusion: {value}\n")
    assert "found undefined alias" in p.message, p.message
    assert p.hint == (f"*{name} names no anchor defined before it: define it as &{name} on the value it stands for, "
                      "above its first use (in this file: aliases do not reach across files)"), p.hint


def test_an_alias_used_before_its_anchor_is_told_to_move_it(tmp_path):
    p = problem(tmp_path, "name: a\ndraft:\n  fusion: *f\nother: &f {kind: eagle3}\n")
    assert p.hint.startswith("*f names no anchor defined before it"), p.hint


def test_another_yaml_error_gets_no_alias_hint(tmp_path):
    p = problem(tmp_path, "name: a\ndraft: [\n")
    assert "anchor" not in p.hint
