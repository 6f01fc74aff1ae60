"""A regex written in double quotes (`match: "^midlayer\\."`) is a YAML error; its message advises single quotes,
quoting the user's own text rewritten so (bounded)."""
import re

import pytest
import yaml

import draftsmith
from draftsmith.errors import SpecError
from draftsmith.specs.yaml_errors import escape_hint
from test_problem_places import LLAMA, edited, line_of   # the built-in spec's text and its editing, shared


def test_a_regex_in_double_quotes_gets_advice_quoting_the_users_text(tmp_path):
    text = edited(LLAMA, **{"{match: '^midlayer\\.',": '{match: "^midlayer\\.",'})
    path = tmp_path / "quoted.yaml"
    path.write_text(text.replace("name: eagle3-llama", "name: quoted"))
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(path)
    (p,) = info.value.problems
    line = line_of(text, '"^midlayer')
    assert p.message.startswith(f"not valid YAML: line {line}, column ") and "unknown escape character" in p.message
    assert p.hint == "A regex in double quotes needs \\\\ for each \\; write it in single quotes: '^midlayer\\.'"
    assert str(info.value).endswith(p.hint)
    # what it proposes is what the built-in spec says, and loads
    fixed = path.read_text().replace('"^midlayer\\."', p.hint.rpartition(": ")[2])
    path.write_text(fixed)
    assert draftsmith.load_spec(path).weights.rules[0].model_extra["match"] == "^midlayer\\."


@pytest.mark.parametrize(("written", "proposed"), [
    ('"^a\\\\.b\\.c"', "'^a\\.b\\.c'"),            # a \\ already right stays one backslash in single quotes
    ('"^it\'s\\.x"', "'^it''s\\.x'"),              # a ' is doubled inside single quotes
    ('"^\\"q\\"\\d"', "'^\"q\"\\d'"),               # \" is a quote
])
def test_the_proposed_single_quoted_text_means_what_the_user_meant(written, proposed):
    text = f"weights:\n  rules: [{{match: {written}, replace: ''}}]\n"
    with pytest.raises(yaml.YAMLError) as info:
        yaml.safe_load(text)
    hint = escape_hint(info.value, text)
    assert hint.endswith(f": {proposed}"), hint
    meant = yaml.safe_load(text.replace(written, proposed))["weights"]["rules"][0]["match"]
    assert meant == re.sub(r'\\([\\"])', r"\1", written[1:-1])


def test_the_advice_is_bounded_and_only_for_unknown_escapes():
    long = "x" * 5000
    text = f'match: "^{long}\\."\n'
    with pytest.raises(yaml.YAMLError) as info:
        yaml.safe_load(text)
    hint = escape_hint(info.value, text)
    assert hint.startswith("A regex in double quotes needs") and len(hint) < 200
    over_lines = 'match: "^a\n  b\\."\n'            # a scalar over two lines: the advice alone
    with pytest.raises(yaml.YAMLError) as info:
        yaml.safe_load(over_lines)
    assert escape_hint(info.value, over_lines).endswith("write it in single quotes")
    with pytest.raises(yaml.YAMLError) as info:   # any other YAML error: no advice
        yaml.safe_load("a: [1, 2\n")
    assert escape_hint(info.value, "a: [1, 2\n") == ""


def test_a_bad_escape_in_a_spec_file_keeps_its_message(spec_error):
    err = spec_error('name: x\ndescription: "a\\qb"\n')
    (p,) = err.problems
    assert p.path == "" and p.message.startswith("not valid YAML: line 2, column ")
    assert p.hint.endswith(": 'a\\qb'")
