"""docs/DESIGN.md's example spec, as README's "Departures from docs/DESIGN.md" says: its one problem is the fusion's
unstated norm_before_residual (no silent default: engines disagree), and stated it is a valid spec."""
import re
from pathlib import Path

import pytest
import yaml

import draftsmith
from draftsmith.errors import SpecError

DESIGN = Path(__file__).parents[2] / "docs" / "DESIGN.md"


def example() -> dict:
    blocks = re.findall(r"```yaml\n(.*?)```", DESIGN.read_text(), re.S)
    found = [yaml.safe_load(b) for b in blocks if b.startswith("name: eagle3-llama")]
    assert len(found) == 1, "docs/DESIGN.md's example spec moved"
    return found[0]


def test_its_one_problem_is_norm_before_residual():
    with pytest.raises(SpecError) as info:
        draftsmith.parse_spec(example(), source="DESIGN.md")
    assert [p.path for p in info.value.problems] == ["draft.fusion.norm_before_residual"]


def test_stated_it_is_valid():
    data = example()
    data["draft"]["fusion"]["norm_before_residual"] = False
    spec = draftsmith.parse_spec(data, source="DESIGN.md")
    assert spec.draft.fusion.kind == "eagle3"
