"""YAML 1.1 reads a plain ``1:05`` as the base-60 number 65 (``1:30.5`` as 90.5), so ``steps: 1:05`` was said as
"65 is not allowed", a number nobody wrote; spec files read it as YAML 1.2 does, as the text it is."""
import pytest

import draftsmith
from draftsmith.errors import SpecError
from draftsmith.specs.documents import load_yaml_text


def test_base_60_digits_read_as_text_every_other_number_as_before():
    data = load_yaml_text("a: 1:05\nb: -1:30.5\nc: 1_000\nd: 1.5\ne: 0x1F\nf: '1:05'\ng: 2:3:4\n", "x.yaml")
    assert data == {"a": "1:05", "b": "-1:30.5", "c": 1000, "d": 1.5, "e": 31, "f": "1:05", "g": "2:3:4"}


def test_a_field_that_wants_a_number_says_what_was_written(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nextends: demo\ndecoding:\n  steps: 1:05\n")
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(spec)
    (p,) = info.value.problems
    assert (p.path, p.line, p.message) == ("decoding.steps", 4, "'1:05' is not allowed"), p
