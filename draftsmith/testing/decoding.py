"""The check every target family's tests make: greedy speculative decoding equals target-only."""
from __future__ import annotations

from collections.abc import Sequence

SHAPES = (dict(topk=1, steps=3), dict(topk=3, steps=3, draft_tokens=7))   # a chain and a tree of 7 nodes


def decodes_as_target_only(model, prompts: Sequence[Sequence[int]] = ((1, 2, 3, 4, 5, 6), (7, 8)),
                           max_new_tokens: int = 12) -> tuple[list, list]:
    """Greedy speculative decoding of ``prompts`` (a batch of unlike lengths) as a chain and as a tree equals
    ``model``'s target-only output; returns (target-only outputs, the tree's outputs)."""
    prompts = [list(p) for p in prompts]
    base = model.generate_baseline(prompts, max_new_tokens=max_new_tokens, stop=[])
    for shape in SHAPES:
        out = model.generate(prompts, max_new_tokens=max_new_tokens, stop=[], **shape)
        assert [o.token_ids for o in out] == [b.token_ids for b in base], shape
    return base, out
