"""Mutation round 36 (specs/extends.py inherited / base_places): a problem in a value an ``extends:`` base gave is
placed at the spec's extends line and column (the column orders two problems on one line), naming the base."""
from __future__ import annotations

import draftsmith
from draftsmith.errors import Problem

BASE = "name: base\nextends: eagle3-llama\ndecoding:\n  topk: 50\n"   # topk on line 4


def test_an_inherited_value_is_placed_at_the_extends_line_and_column(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "child.yaml").write_text("name: child\n\nextends: base.yaml\n")
    spec = draftsmith.load_spec(tmp_path / "child.yaml")
    [p] = spec.error([Problem("decoding.topk", "too many")]).problems
    assert (p.line, p.column) == (3, 1), p
    assert p.message == f"too many (from the base {tmp_path / 'base.yaml'}, line 4)", p
