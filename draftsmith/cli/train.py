"""``draftsmith train``: train the draft a spec declares against a target folder."""
from __future__ import annotations
