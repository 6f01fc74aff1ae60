"""`rope_theta: 5e5` (or `eps: 1e-6`) is a number to the user and a string to YAML 1.1 (PyYAML wants a dot in the
mantissa and a sign on the exponent): it was refused as "'5e5' is not allowed ... a number" with no word on why
(found by mutation round 26d). The problem now says how to write it, in a form YAML reads as that float."""
import pytest
import yaml

import draftsmith
from draftsmith.specs.translate import yaml_float


@pytest.mark.parametrize("text", ["5e5", "1e-6", "2.5E+3", "1e20", "-3e-2", ".5e1"])
def test_the_written_form_reads_back_as_the_same_float(text):
    assert yaml.safe_load(f"x: {yaml_float(text)}")["x"] == float(text)


def test_an_exponent_written_as_yaml_reads_a_string_is_said_with_its_fix(tmp_path):
    spec = tmp_path / "t.yaml"
    spec.write_text("name: t\nextends: eagle3-llama\ndraft:\n  attention: {kind: gqa, rope_theta: 5e5}\n")
    with pytest.raises(draftsmith.SpecError) as err:
        draftsmith.load_spec(spec)
    assert "draft.attention.rope_theta: '5e5' is not allowed. YAML reads 5e5 as a string; write the number as " \
           "500000.0 (line 4)" in str(err.value)
    spec.write_text("name: t\nextends: eagle3-llama\ndraft:\n  attention: {kind: gqa, rope_theta: 500000.0}\n")
    assert draftsmith.load_spec(spec).draft.attention.params["rope_theta"] == 500000.0
