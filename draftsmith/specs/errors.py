"""One error for every problem in a spec: file, dotted path, what was found, what is allowed, a suggestion."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_UNSET = object()


@dataclass(frozen=True)
class Problem:
    path: str                 # dotted path inside the spec, e.g. "draft.attention.kind"
    message: str
    found: Any = _UNSET
    allowed: str = ""         # e.g. "gqa (builtin), mla (builtin)"
    hint: str = ""            # e.g. "Did you mean 'gqa'?"

    def render(self) -> str:
        head = f"  {self.path or '<top>'}: {self.message}"
        if self.found is not _UNSET and repr(self.found) not in self.message:
            head += f" (found {self.found!r})"
        if self.hint:
            head = f"{head.rstrip('.')}. {self.hint.strip()}"
        return head + (f"\n      allowed: {self.allowed}" if self.allowed else "")


class SpecError(ValueError):
    """Raised with every problem of a spec at once."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source, self.problems = source, list(problems)
        n = len(self.problems)
        lines = [f"{source} has {n} problem{'s' if n != 1 else ''}", *(p.render() for p in self.problems)]
        super().__init__("\n".join(lines))
