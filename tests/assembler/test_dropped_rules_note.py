"""A spec that extends another and writes its own weights.rules replaces the base's whole list (lists are not
merged); where a base rule it left out matches the checkpoint's names, a failing load says so (a rule-writing
hunt, 2026-12-01: the errors showed the names and never the dropped rule)."""
from __future__ import annotations

import pytest

import draftsmith
from draftsmith.errors import DraftsmithError
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("dropped")
    target = write_target(root / "t", "llama", num_hidden_layers=7, seed=1)
    return root, target, write_eagle3(root / "nemo", target, layout="nemo")


def notes(root, rules: str, target, draft) -> list[str]:
    spec = root / f"s{abs(hash(rules))}.yaml"
    spec.write_text(f"name: mine\nextends: eagle3-llama\nweights:\n  rules:\n{rules}")
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble(str(spec), target=target, draft=draft)
    return [n for n in getattr(info.value, "__notes__", []) if "replaced the whole list" in n]


def test_a_dropped_base_rule_that_matches_the_names_is_said(pair):
    root, target, draft = pair
    (said,) = notes(root, "    - {match: '^fc\\.', replace: 'fc.'}\n", target, draft)
    assert said.startswith("note: this spec's weights.rules replaced the whole list of its base eagle3-llama (a list "
                           "is not merged), so the base's rules it leaves out no longer read these names: "
                           r"'^model\.' -> '' ('model.fc.weight', "), said
    assert "'^midlayer" not in said   # the base's midlayer rule matches none of these names: not said


def test_a_base_rule_kept_or_matching_nothing_is_not_said(pair):
    root, target, draft = pair
    # fails (fc.weight becomes fcx.weight); the base's '^model\\.' is kept, its '^midlayer\\.' matches nothing here
    kept = "    - {match: '^model\\.fc\\.', replace: 'fcx.'}\n    - {match: '^model\\.', replace: ''}\n"
    assert notes(root, kept, target, draft) == []
