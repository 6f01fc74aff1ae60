"""A load problem names a weight rule by its index and, where the spec's text writes it, its line, as the spec's
validation names a problem's line: a rule an ``extends:`` base gave is said at the extends line with the base's file
and line; a spec given as data has no lines to say."""
from __future__ import annotations

import draftsmith
from draftsmith.assembler.build import rule_set
from draftsmith.components.weights import RuleSet
from draftsmith.registry import default_registry
from draftsmith.specs.loader import parse_spec

RULES = "weights:\n  rules:\n    - {match: '^a\\.', replace: 'b.'}\n\n    - {match: '^c\\.', replace: 'd.'}\n"


def test_a_rule_is_said_with_its_line_in_its_own_file_and_in_a_base(tmp_path):
    (tmp_path / "base.yaml").write_text("name: base\nextends: eagle3-llama\n" + RULES)
    (tmp_path / "child.yaml").write_text("name: child\n\nextends: base.yaml\ndecoding: {topk: 2}\n")
    own = rule_set(draftsmith.load_spec(tmp_path / "base.yaml"), default_registry())
    assert [own.describe(0), own.describe(1), own.describe(None)] == [
        "rule 0 (line 5): '^a\\.' -> 'b.'", "rule 1 (line 7): '^c\\.' -> 'd.'", "(no rule matched; name kept)"]
    child = rule_set(draftsmith.load_spec(tmp_path / "child.yaml"), default_registry())
    assert child.describe(1) == f"rule 1 (line 3; from the base {tmp_path / 'base.yaml'}, line 7): '^c\\.' -> 'd.'"


def test_a_spec_given_as_data_or_a_rule_set_alone_says_no_line():
    data = {"name": "data", "extends": "eagle3-llama", "weights": {"rules": [{"match": "^a\\.", "replace": "b."}]}}
    assert rule_set(parse_spec(data), default_registry()).describe(0) == "rule 0: '^a\\.' -> 'b.'"
    assert RuleSet(rule_set(parse_spec(data), default_registry()).rules).describe(0) == "rule 0: '^a\\.' -> 'b.'"


def test_the_places_come_from_the_spec_s_text_not_from_an_error_s_words(tmp_path, monkeypatch):
    # Spec.places read an inherited value's place back out of Spec.error's message (h112): it reads the texts now
    from draftsmith.specs.schema import Spec

    (tmp_path / "base.yaml").write_text("name: base\nextends: eagle3-llama\n" + RULES)
    (tmp_path / "child.yaml").write_text("name: child\n\nextends: base.yaml\ndecoding: {topk: 2}\n")
    own, child = (draftsmith.load_spec(tmp_path / n) for n in ("base.yaml", "child.yaml"))
    monkeypatch.setattr(Spec, "error", lambda *a, **k: (_ for _ in ()).throw(AssertionError("error's words read")))
    assert own.places(["weights.rules.0", "weights.rules.1", "name"]) == {
        "weights.rules.0": "line 5", "weights.rules.1": "line 7", "name": "line 1"}
    assert child.places(["weights.rules.1"]) == {
        "weights.rules.1": f"line 3; from the base {tmp_path / 'base.yaml'}, line 7"}
