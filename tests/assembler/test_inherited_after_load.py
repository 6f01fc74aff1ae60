"""A problem found after the spec loaded (against the checkpoints, against the machine) in a value an ``extends:``
base gave is said as the loader says a base's value: at the spec's ``extends`` line, naming the base's file and line
(it was placed at the child's own ``decoding:`` line, which says another field, or at none); a with_decoding()
value at no line of the file (it was said at the file's line for that field)."""

import pytest
import torch
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.errors import OptionError, SpecError
from draftsmith.testing import write_eagle3, write_target

BASE = "name: base\nextends: eagle3-llama\ndecoding:\n  topk: 50\n"   # topk on line 4; the draft has 40 tokens
CHILD = "name: child\nextends: base.yaml\ndecoding:\n  steps: 3\n"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("inherited")
    target = write_target(root / "t")
    return target, write_eagle3(root / "d", target, draft_vocab=40)


def _load_error(tmp_path, pair, base=BASE, child=CHILD, kind=SpecError):
    (tmp_path / "base.yaml").write_text(base)
    (tmp_path / "child.yaml").write_text(child)
    with pytest.raises(kind) as info:
        draftsmith.assemble(tmp_path / "child.yaml", target=pair[0], draft=pair[1])
    return info.value


def test_a_base_value_the_draft_refuses_is_said_at_extends_naming_the_base(tmp_path, pair):
    (p,) = _load_error(tmp_path, pair).problems
    assert (p.path, p.line) == ("decoding.topk", 2)
    assert p.message.endswith(f"the draft's vocabulary has 40 tokens (from the base {tmp_path / 'base.yaml'}, line 4)")


def test_the_childs_own_value_keeps_its_own_line(tmp_path, pair):
    (p,) = _load_error(tmp_path, pair, child=CHILD + "  topk: 45\n").problems
    assert (p.line, "from the base" in p.message) == (5, False), p


def test_a_value_two_bases_away_names_the_farther_base(tmp_path, pair):
    (tmp_path / "far.yaml").write_text(BASE)
    (p,) = _load_error(tmp_path, pair, base="name: base\nextends: far.yaml\n").problems
    assert p.line == 2 and p.message.endswith(f"(from the base {tmp_path / 'far.yaml'}, line 4)"), p


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine honours graphs: on")
def test_a_machine_setting_a_base_gave(tmp_path, pair):
    base = "name: base\nextends: eagle3-llama\ndecoding:\n  graphs: on\n"
    error = _load_error(tmp_path, pair, base=base, kind=OptionError)
    (p,) = error.problems
    assert p.line == 2 and p.message.endswith(f"(from the base {tmp_path / 'base.yaml'}, line 4)"), p
    res = CliRunner().invoke(app, ["validate", str(tmp_path / "child.yaml")])
    assert res.exit_code == 0 and f"(from the base {tmp_path / 'base.yaml'}, line 4) (line 2)" in res.stderr, \
        res.output


def test_a_with_decoding_value_is_said_at_no_line_of_the_file(tmp_path, pair):
    (tmp_path / "s.yaml").write_text("name: s\nextends: eagle3-llama\ndecoding:\n  topk: 4\n")
    spec = draftsmith.load_spec(tmp_path / "s.yaml").with_decoding(topk=50)
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(spec, target=pair[0], draft=pair[1])
    assert str(info.value).startswith(f"{spec.source} (its decoding section as with_decoding() left it) has 1 "
                                      "problem") and "(line " not in str(info.value), str(info.value)


def test_a_spec_given_as_data_keeps_no_lines(pair):
    spec = draftsmith.parse_spec({"name": "x", "extends": "eagle3-llama", "decoding": {"topk": 50}})
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(spec, target=pair[0], draft=pair[1])
    (p,) = info.value.problems
    assert p.line is None and "from the base" not in p.message, p
