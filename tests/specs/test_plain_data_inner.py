"""A mapping holding a key that is no string is kept for validation without that key (it was dropped whole), so
the problems inside it are said with the key's: one problem does not hide the next."""
import pytest

from draftsmith.errors import SpecError
from draftsmith.specs.loader import parse_spec


def problems(text: str, tmp_path) -> list[str]:
    import yaml

    with pytest.raises(SpecError) as info:
        parse_spec(yaml.safe_load(text), source="x.yaml")
    return [f"{p.path}: {p.message}" for p in info.value.problems]


def test_a_non_string_key_does_not_hide_the_problems_beside_it(tmp_path):
    said = problems("name: x\ndraft:\n  2024-01-01: x\n  num_layers: -5\n  layer: {kind: llama}\n"
                    "  fusion: {kind: eagle1}\n", tmp_path)
    assert said == ["draft: a mapping key must be a string", "draft.num_layers: -5 is not allowed"]


def test_a_value_that_is_no_plain_data_is_said_once_with_the_rest(tmp_path):
    said = problems("name: x\ndraft:\n  num_layers: 2024-01-01\n  layer: {kind: gqx}\n  fusion: {kind: eagle1}\n",
                    tmp_path)
    assert said[0].startswith("draft.num_layers: a YAML timestamp is not allowed in a spec")
    assert len([s for s in said if s.startswith("draft.num_layers")]) == 1
    assert any(s.startswith("draft.layer") for s in said), said
