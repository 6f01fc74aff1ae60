"""One error for every problem in a spec: file, dotted path, what was found, what is allowed, a suggestion."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from draftsmith.errors import DraftsmithError, short, short_text

_UNSET = object()
SHOWN = 60  # problems printed in one message; the rest are counted (all stay in ``SpecError.problems``)


@dataclass(frozen=True)
class Problem:
    path: str                 # dotted path inside the spec, e.g. "draft.attention.kind"
    message: str
    found: Any = _UNSET
    allowed: str = ""         # e.g. "gqa (builtin), mla (builtin)"
    hint: str = ""            # e.g. "Did you mean 'gqa'?"

    def render(self) -> str:
        # every part is bounded: a quoted value is cut by short(), a path or message built from user text too
        head = f"  {short_text(self.path, 200) or '<top>'}: {short_text(self.message, 400)}"
        if self.found is not _UNSET and (found := short(self.found)) not in self.message:
            head += f" (found {found})"
        if self.hint:
            head = f"{head.rstrip('.')}. {short_text(self.hint.strip(), 400)}"
        return head + (f"\n      allowed: {short_text(self.allowed, 1000)}" if self.allowed else "")


class SpecError(DraftsmithError, ValueError):
    """Raised with every problem of a spec at once."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source, self.problems = source, list(problems)
        n = len(self.problems)
        lines = [f"{short_text(str(source), 300)} has {n} problem{'s' if n != 1 else ''}",
                 *(p.render() for p in self.problems[:SHOWN])]
        if n > SHOWN:
            lines.append(f"  ... and {n - SHOWN} more")
        super().__init__("\n".join(lines))
