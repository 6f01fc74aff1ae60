"""convert's last line for a draft whose proposed spec has split rules says the rule differences readably and
bounded ("weights.rules: 2 split rule(s) added"), not a cut Python repr of the rule dicts."""
import pytest

from draftsmith.convert.run import _shown, loading_line
from draftsmith.testing import write_eagle3, write_target
from test_inspect_split import SIZES, fuse   # a written draft with q|k|v and gate|up stacked, shared


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("line") / "t", **SIZES)


def test_the_last_line_counts_the_split_rules_added(target, tmp_path):
    draft = fuse(write_eagle3(tmp_path / "plain", target), tmp_path / "fused")
    line = loading_line(draft)
    assert "weights.rules: 2 split rule(s) added," in line, line
    assert "{'" not in line and "'kind'" not in line and len(line) < 400, line
    assert line.startswith("omit --spec: generate --draft detects it (spec eagle3-llama with ")


def test_rule_changes_are_counted_by_kind_both_ways():
    family = {"weights": {"rules": [{"match": "^a", "replace": "b"}, {"match": "^c", "replace": "d"}]}}
    split = {"kind": "split", "match": "x", "into": ["y", "z"]}
    assert _shown("weights.rules", [split, family["weights"]["rules"][0]], family) == (
        "1 split rule(s) added, 1 regex rule(s) removed")
    assert _shown("draft.num_layers", 2, family) == "2"
