"""The README's list of target types ("Targets: ...") names every type TARGETS loads (mixtral came in unlisted)."""
from pathlib import Path

import pytest

from draftsmith.components.targets import TARGETS

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_lists_every_target_type():
    if not README.is_file():
        pytest.skip("not run from a checkout")
    text = README.read_text(encoding="utf-8")
    start = text.index("\nTargets: ")
    listed = text[start:text.index("each checked against transformers' logits", start)]
    assert [name for name in TARGETS if f"`{name}`" not in listed.replace("`/`", "` `")] == []
