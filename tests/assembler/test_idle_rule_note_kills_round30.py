"""Mutation survivors of assembler/names.py idle_rule_note (round 30): the rule is said whole up to 300 characters
and cut past them (catches short_text(rules.describe(i), 300) -> 299 or 301)."""
from types import SimpleNamespace

import pytest

from draftsmith.assembler.names import idle_rule_note


class Rules:
    """A RuleSet stand-in: one rename rule no checkpoint name took, described in ``width`` characters."""
    def __init__(self, width):
        self.rules = [SimpleNamespace(match=r"^blocks\.0\.", replace="layers.0.")]
        self.width = width

    def to_parts(self, name):
        return name, None

    def describe(self, i):
        return "r" * (self.width - 1) + "!"


@pytest.mark.parametrize("width, said", [(300, "r" * 299 + "!"), (301, "r" * 148 + "..." + "r" * 147 + "!")])
def test_the_rule_is_said_whole_to_300_characters(width, said):
    name = "block.0.mlp.up_proj.weight"
    note = idle_rule_note(Rules(width), [name], ["layers.0.mlp.up_proj.weight"], [name])
    assert note.startswith(f"note: {said} matched no checkpoint name"), note
