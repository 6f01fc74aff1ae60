"""The built-in specs shipped as package data (``draftsmith/specs/builtin/*.yaml``)."""
from __future__ import annotations

from pathlib import Path

from draftsmith.hooks import SpecSource

BUILTIN_DIR = Path(__file__).parent / "builtin"


def builtin_specs() -> list[SpecSource]:
    return [SpecSource(name=p.stem, path=p) for p in sorted(BUILTIN_DIR.glob("*.yaml"))]
