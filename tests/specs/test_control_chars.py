"""A weight-rule or ignore pattern holding a control character is refused at spec level, naming the character and
saying why (in double quotes YAML reads \\b as a backspace, \\t as a tab): no checkpoint name holds one, so the
pattern would pass and then match nothing. Also: ``validate`` never calls a spec valid whose ``${key}`` the draft's
config cannot bind."""
import pytest
import yaml
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.errors import SpecError
from draftsmith.specs.catalog import BUILTIN_DIR

DEMO = yaml.safe_load((BUILTIN_DIR / "demo.yaml").read_text())
HEAD = (BUILTIN_DIR / "demo.yaml").read_text().split("weights:")[0]
TAIL = "decoding: {topk: 4, steps: 5, draft_tokens: 8, page_size: 1, mode: auto}\n"


def write(tmp_path, weights: str):
    path = tmp_path / "spec.yaml"
    path.write_text(HEAD + "weights:\n" + weights + TAIL)
    return path


def problems(path):
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(path)
    return str(e.value)


@pytest.mark.parametrize("quoted, char, why", [
    (r'"\bmidlayer\\."', r"'\x08'", r"reads \b as a backspace"),
    (r'"^midlayer\x2e\t"', r"'\t'", r"reads \t as a tab"),
    (r'"^mid\x01layer"', r"'\x01'", r"reads \xNN as that character"),
])
def test_a_rule_match_with_a_control_character_is_refused(tmp_path, quoted, char, why):
    text = problems(write(tmp_path, f"  rules:\n    - {{match: {quoted}, replace: 'layers.0.'}}\n"))
    assert "weights.rules.0.match: the pattern holds the control character " + char in text, text
    assert "so it would match nothing" in text and why in text and "write the pattern in single quotes" in text


def test_an_ignore_pattern_with_a_control_character_is_refused(tmp_path):
    path = write(tmp_path, "  rules:\n    - {match: '^midlayer\\.', replace: 'layers.0.'}\n"
                           '  ignore: ["\\bd2t$", \'^t2d$\']\n')
    text = problems(path)
    assert text.count("control character") == 1, text
    assert r"weights.ignore.0: the pattern holds the control character '\x08'" in text, text


def test_inverse_and_replace_are_checked_too(tmp_path):
    text = problems(write(tmp_path, "  rules:\n    - {match: '^midlayer\\.', replace: \"layers\\t0.\", "
                                    "inverse: [\"^layers\\b\", 'midlayer.']}\n"))
    assert r"weights.rules.0.replace: the replacement holds the control character '\t'" in text, text
    assert r"weights.rules.0.inverse.0: the pattern holds the control character '\x08'" in text, text


def test_the_same_patterns_in_single_quotes_load(tmp_path):
    path = write(tmp_path, "  rules:\n    - {match: '^midlayer\\x2e', replace: 'layers.0.'}\n  ignore: ['\\bd2t$']\n")
    assert list(draftsmith.load_spec(path).weights.ignore) == [r"\bd2t$"]


def test_validate_refuses_it(tmp_path):
    path = write(tmp_path, '  rules:\n    - {match: "\\bmidlayer\\\\.", replace: \'layers.0.\'}\n')
    res = CliRunner().invoke(app, ["validate", str(path)], env={"COLUMNS": "1000"})
    assert res.exit_code == 1 and "control character '\\x08'" in res.output and ": ok" not in res.output, res.output


def test_validate_does_not_call_a_spec_with_an_unbindable_placeholder_valid(tmp_path):
    data = dict(DEMO, weights={"rules": [{"match": r"^midlayer\.", "replace": "layers.0."},
                                         {"match": r"^x${nope}\.", "replace": "y."}]})
    data["checkpoints"] = {k: str((BUILTIN_DIR / v).resolve()) for k, v in DEMO["checkpoints"].items()}
    path = tmp_path / "unbound.yaml"
    path.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(app, ["validate", str(path)], env={"COLUMNS": "1000"})
    assert res.exit_code == 1 and "${nope} cannot be bound" in res.output, res.output
    assert "is valid" not in res.output and ": ok" not in res.output, res.output
    assert f"{path}: the spec (demo) has problems its checkpoints show" in res.output, res.output
