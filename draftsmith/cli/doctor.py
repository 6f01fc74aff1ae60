"""``draftsmith doctor``: find the spec setting that restores a draft's acceptance."""
from __future__ import annotations
