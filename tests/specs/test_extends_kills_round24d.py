"""Kills for specs/extends.py survivors (round 24d): a problem found after load in a value an ``extends:`` base gave
is said at the spec's own ``extends`` line only where its text writes one (else at no line, not at the document's
line 1), naming the base's file cut to 300 characters; the Inheritance a loaded spec keeps for that is frozen, as the
spec that holds it is."""
import dataclasses

import pytest

import draftsmith
from draftsmith.errors import SpecError
from draftsmith.specs.loader import parse_spec
from draftsmith.testing import write_eagle3, write_target

BASE = "name: base\nextends: eagle3-llama\ndecoding:\n  topk: 50\n"   # topk on line 4; the draft has 40 tokens


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("inherited24d")
    target = write_target(root / "t")
    return target, write_eagle3(root / "d", target, draft_vocab=40)


def _problem(spec, pair):
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(spec, target=pair[0], draft=pair[1])
    (p,) = info.value.problems
    return p


def test_a_specs_file_that_writes_no_extends_places_a_bases_value_at_no_line(tmp_path, pair):
    """A spec given as data (its extends added in code) whose source file does not write ``extends``: the base's
    value is said naming the base, at no line of that file (own.place('extends', False): the document's own place,
    line 1, is no place of extends)."""
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "child.yaml").write_text("name: child\ndescription: mine\n")
    spec = parse_spec({"name": "child", "extends": "base.yaml"}, source=str(tmp_path / "child.yaml"))
    p = _problem(spec, pair)
    assert (p.path, p.line, p.column) == ("decoding.topk", None, None), p
    assert p.message.endswith(f"(from the base {tmp_path / 'base.yaml'}, line 4)"), p


@pytest.mark.parametrize("length", [300, 301])
def test_the_bases_file_is_named_whole_up_to_300_characters(tmp_path, pair, length):
    """short_text(base.source, 300): a base file's path of 300 characters is named whole, one of 301 is cut."""
    pad = length - len(str(tmp_path / "x" / "base.yaml"))
    base = tmp_path / ("x" * (pad + 1)) / "base.yaml"
    assert len(str(base)) == length
    base.parent.mkdir()
    base.write_text(BASE)
    (tmp_path / "child.yaml").write_text(f"name: child\nextends: {base}\n")
    p = _problem(tmp_path / "child.yaml", pair)
    said = p.message.split("(from the base ")[1].removesuffix(", line 4)")
    assert (said == str(base)) == (length <= 300) and len(said) <= 300 and p.line == 2, (len(said), p)


def test_a_loaded_specs_inheritance_cannot_be_changed(tmp_path):
    """``dataclass(frozen=True)``: assigning a field of the kept Inheritance raises FrozenInstanceError."""
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "child.yaml").write_text("name: child\nextends: base.yaml\n")
    kept = draftsmith.load_spec(tmp_path / "child.yaml")._inherited
    assert kept is not None and kept.source == str(tmp_path / "child.yaml"), kept
    with pytest.raises(dataclasses.FrozenInstanceError):
        kept.source = "elsewhere.yaml"
