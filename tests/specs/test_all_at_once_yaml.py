"""A YAML-level mistake does not hide the rest of a spec's problems: every repeated key is said at its dotted path
and line with the file's typos, and every value that is not plain data (a timestamp, a set) with the others and
the fields' own problems (found by a dogfooding helper: the first repeat, or the first timestamp, was said alone,
a repeat at '<top>' in libyaml's words)."""
import pytest

from draftsmith.errors import SpecError
from draftsmith.specs.loader import load_spec

FUSION = "{kind: eagle3, norm_before_residual: false}"


def problems(tmp_path, text: str) -> list[tuple[str, str, int | None]]:
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    return [(p.path, p.message, p.line) for p in info.value.problems]


def test_every_repeated_key_is_said_with_the_other_problems(tmp_path):
    said = problems(tmp_path, f"name: my-draft\ndraft:\n  num_layer: 1\n  fusion: {FUSION}\n  fusion: {FUSION}\n"
                              "decoding: {topk: 4, topk: 2, stpes: 5}\n")
    assert [(path, line) for path, _, line in said] == [("draft.num_layer", 3), ("draft.fusion", 5),
                                                        ("decoding.topk", 6), ("decoding.stpes", 6)]
    assert said[1][1] == "the key appears twice in one mapping (first at line 4); YAML would keep the last"


def test_a_repeated_key_alone_is_said_alone(tmp_path):
    said = problems(tmp_path, f"name: demo2\nname: demo3\ndraft: {{fusion: {FUSION}}}\n")
    assert said == [("name", "the key appears twice in one mapping (first at line 1); YAML would keep the last", 2)]


def test_every_value_that_is_no_plain_data_is_said_with_the_fields_problems(tmp_path):
    said = problems(tmp_path, f"name: my-draft\ndescription: 2024-01-01\ndraft:\n  fusion: {FUSION}\n"
                              "  vocab: !!set {a, b}\ndecoding: {topK: 4, steps: '5'}\n")
    assert [(path, line) for path, _, line in said] == [("description", 2), ("draft.vocab", 5), ("decoding.topK", 6),
                                                        ("decoding.steps", 6)]
    assert said[0][1].startswith("a YAML timestamp is not allowed in a spec; write a string (quote it: '...')")
    assert said[1][1].startswith("a YAML set is not allowed in a spec")


def test_a_pasted_non_breaking_space_is_named_where_it_is(tmp_path):
    """libyaml stops a line after it ('line 7 ... could not find expected ':'' in a 6-line file)."""
    (problem,) = [p for p in _errors(tmp_path, "name: x\ndecoding:\n  topk: 4\n  steps:\u00a05\n")]
    assert problem.hint == ("Line 4, column 9 holds U+00A0, a space YAML reads as text, not as a space; replace it "
                            "with an ordinary space")
    (problem,) = _errors(tmp_path, "name: x\ndecoding:\n  topk: 4\n  steps: [5\n")
    assert "U+" not in problem.hint


def _errors(tmp_path, text: str):
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    return info.value.problems
