"""A tab where YAML wants indentation: libyaml says "found character that cannot start any token" without naming
the character; the problem's hint says it is a tab and to indent with spaces. Elsewhere no such hint."""
import pytest

import draftsmith
from draftsmith.errors import SpecError
from test_problem_places import LLAMA   # the built-in spec's text, shared

TAB = "The character there is a tab: YAML indents with spaces only; replace it with spaces"


def problem(tmp_path, text: str):
    path = tmp_path / "tabs.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(path)
    (p,) = info.value.problems
    return p


@pytest.mark.parametrize("indent", ["\t", "  \t"])
def test_a_tab_in_the_indentation_gets_the_hint(tmp_path, indent):
    text = LLAMA.replace("name: eagle3-llama", "name: tabs").replace("\n  num_layers:", f"\n{indent}num_layers:", 1)
    assert text != LLAMA.replace("name: eagle3-llama", "name: tabs")
    p = problem(tmp_path, text)
    assert p.message.startswith("not valid YAML: line ") and p.hint == TAB, (p.message, p.hint)
    assert str(p).endswith(TAB) or TAB in str(p)


def test_another_yaml_error_gets_no_tab_hint(tmp_path):
    p = problem(tmp_path, "name: x\ndraft: [1, 2\n")
    assert p.message.startswith("not valid YAML: ") and p.hint != TAB, p.hint
