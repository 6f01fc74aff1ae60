"""Mutation round 36 (specs/schema.py Spec.places): a decoding field the file writes has its line, one
with_decoding() replaced has none (its file does not say it), and a path neither the spec's text nor an extends line
writes is left out (not said at the document's line 1)."""
from __future__ import annotations

import draftsmith
from draftsmith.specs.loader import parse_spec

BASE = "name: base\nextends: eagle3-llama\ndecoding:\n  topk: 50\n"   # topk on line 4


def test_decoding_paths_are_placed_unless_replaced(tmp_path):
    (tmp_path / "s.yaml").write_text("name: s\nextends: eagle3-llama\ndecoding:\n  topk: 2\n  attention: sdpa\n")
    spec = draftsmith.load_spec(tmp_path / "s.yaml")
    paths = ["decoding.topk", "decoding.attention"]
    assert spec.places(paths) == {"decoding.topk": "line 4", "decoding.attention": "line 5"}
    assert spec.with_decoding(attention="eager").places(paths) == {"decoding.topk": "line 4"}


def test_a_path_no_text_writes_is_left_out(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "child.yaml").write_text("name: child\ndescription: mine\n")   # no extends line to say it at
    spec = parse_spec({"name": "child", "extends": "base.yaml"}, source=str(tmp_path / "child.yaml"))
    assert spec.places(["decoding.topk", "decoding.steps"]) == {}
    own = draftsmith.load_spec(tmp_path / "base.yaml")
    assert own.places(["decoding.topk", "nothere.x", "checkpoints.target"]) == {"decoding.topk": "line 4"}
