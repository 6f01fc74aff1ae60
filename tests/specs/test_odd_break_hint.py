"""A character YAML 1.1 reads as a line break and editors do not (U+2028, U+2029, U+0085), pasted inside a plain
value, ended the line there: the error was said a line or two below with nothing there to see. The hint names it by
the file's own lines; quoted, the value holds it and loads."""
import pytest

import draftsmith
from draftsmith.errors import SpecError


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u0085"])
def test_a_pasted_line_break_is_named_by_the_files_own_lines(tmp_path, char):
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: s\nextends: demo\ndescription: a{char}b\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(spec)
    (p,) = info.value.problems
    assert p.hint == (f"Line 3, column 15 holds U+{ord(char):04X}, which YAML reads as a line break (the error's "
                      "line numbers count it); remove it, or put the value in double quotes"), p


def test_quoted_it_loads(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text('name: s\nextends: demo\ndescription: "a\u2028b"\n', encoding="utf-8")
    assert draftsmith.load_spec(spec).description == "a\u2028b"
