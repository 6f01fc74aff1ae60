"""A placement hunt (2,178 generated specs extending bases; each of these failed before its fix): `extends` written
inside a merge key was not found, so a base's value was placed at a child's line naming another field; tap ids only a
base writes were said at the child's aux_layers line (their path is now the ids' own); a base's value reached through an
alias lost the alias note a file's own gets; with_decoding() took the lines of the file's own values too."""
import pytest
import torch

import draftsmith
from draftsmith.components import backends
from draftsmith.errors import SpecError
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("h31")
    t = write_target(root / "t")
    return t, write_eagle3(root / "d", t, draft_vocab=40)


def _error(tmp_path, pair, base, child, kind=SpecError):
    (tmp_path / "base.yaml").write_text(base)
    (tmp_path / "child.yaml").write_text(child)
    with pytest.raises(kind) as info:
        draftsmith.assemble(tmp_path / "child.yaml", target=pair[0], draft=pair[1])
    return info.value


@pytest.mark.parametrize("base", ["name: base\nextends: eagle3-llama\ndecoding:\n  topk: 50\n",   # after load
                                  "name: base\nextends: eagle3-llama\nquant: {method: nope}\n"])  # at load
def test_extends_written_in_a_merge_key_is_where_a_bases_value_is_said(tmp_path, pair, base):
    (p,) = _error(tmp_path, pair, base, "name: child\n<<: {extends: base.yaml}\ndecoding:\n  steps: 3\n").problems
    assert "from the base" in p.message and p.line == 2, p


def test_tap_ids_only_a_base_writes_are_said_from_the_base(tmp_path, pair):
    base = "name: base\nextends: eagle3-llama\ndraft:\n  fusion:\n    aux_layers:\n      ids: [1, 99, 3]\n"
    child = "name: child\nextends: base.yaml\ndraft:\n  fusion:\n    aux_layers: {at: input}\n"
    (p,) = _error(tmp_path, pair, base, child).problems
    assert p.line == 2 and p.message.endswith(f"(from the base {tmp_path / 'base.yaml'}, line 6)"), p


def test_a_bases_value_through_an_alias_merge_keeps_the_alias_note(tmp_path, pair):
    rules = "weights:\n  rules:\n    - &r {match: '(', replace: x}\n    - {<<: *r, replace: y}\n"
    error = _error(tmp_path, pair, "name: base\nextends: eagle3-llama\n" + rules,
                   "name: child\nextends: base.yaml\ndecoding:\n  steps: 3\n")
    p = next(p for p in error.problems if p.path == "weights.rules.1.match")
    assert "alias *r" in p.message or "line 5)" in p.message, p


@pytest.mark.skipif(torch.cuda.is_available() or backends.has_flash_attn(), reason="the machine honours them")
def test_with_decoding_keeps_the_files_own_value_at_its_line(tmp_path, pair):
    (tmp_path / "child.yaml").write_text("name: child\nextends: eagle3-llama\ndecoding:\n  steps: 3\n"
                                         "  attention: flash\n")
    spec = draftsmith.load_spec(tmp_path / "child.yaml").with_decoding(graphs="on")
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(spec, target=pair[0], draft=pair[1])
    lines = {p.path: p.line for p in info.value.problems}
    assert lines == {"decoding.graphs": None, "decoding.attention": 5}, lines
