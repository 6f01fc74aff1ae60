"""Held-out evaluation: decode held-out prompts with the real engine and report acceptance per draft position.

The numbers are the engine's own (``Stats``), pooled over prompts: tau = committed / verification steps, and
``rate[i]`` = share of verification steps that accepted at least i+1 draft tokens."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Acceptance:
    steps: int = 0
    committed: int = 0
    accepted: list[int] = field(default_factory=list)
    same_as_target: bool = True

    @property
    def tau(self) -> float:
        return self.committed / self.steps if self.steps else 1.0

    @property
    def rate(self) -> list[float]:
        return [a / self.steps for a in self.accepted] if self.steps else []

    def add(self, stats) -> None:
        self.steps += stats.steps
        self.committed += stats.committed
        acc = stats.accepted_per_position
        self.accepted += [0] * (len(acc) - len(self.accepted))
        for i, a in enumerate(acc):
            self.accepted[i] += a

    def line(self) -> str:
        return f"tau {self.tau:.2f}  accepted per position " + " ".join(f"{r:.2f}" for r in self.rate)


def acceptance(model, prompts: Sequence[Sequence[int]], *, max_new_tokens: int = 64, check: bool = False,
               **plan) -> Acceptance:
    """Greedy decoding of each prompt with ``plan`` (topk / steps / draft_tokens overrides); ``check`` also
    decodes target-only and records whether every output matched it."""
    acc = Acceptance()
    for p in prompts:
        res = model.generate(list(p), max_new_tokens=max_new_tokens, temperature=0.0, **plan)
        acc.add(res.stats)
        if check:
            base = model.generate_baseline(list(p), max_new_tokens=max_new_tokens)
            acc.same_as_target &= base.token_ids == res.token_ids
    return acc


PLANS = {  # name -> generate() overrides; the tree first
    "tree topk 4, 6 levels, 17 nodes": dict(topk=4, steps=6, draft_tokens=17),
    "chain 5": dict(topk=1, steps=5),
    "spec default": {},
}
