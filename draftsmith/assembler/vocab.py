"""Reduced draft vocabularies: ``d2t`` offsets (target = draft + d2t[draft]) and the ``t2d`` mask."""
from __future__ import annotations

import torch

from draftsmith.errors import DraftsmithError


class VocabMapError(DraftsmithError, ValueError):
    pass


def check_vocab_map(d2t: torch.Tensor, t2d: torch.Tensor | None, *, source: str = "draft",
                    vocab: int | None = None) -> None:
    """Refuse a map that would silently collapse acceptance: every rule of invariant 24, all reported at once.

    An all-zero d2t is valid (the draft keeps the first Vd target tokens, and t2d says so); a d2t missing from
    the checkpoint is the load plan's to report, as a missing tensor. ``t2d`` None: the checkpoint holds none (it
    is derived from d2t), and d2t is checked against the target's ``vocab``."""
    d2t = d2t.cpu()
    t2d = t2d.cpu() if t2d is not None else None
    vd, v = d2t.shape[0], (t2d.shape[0] if t2d is not None else vocab)
    problems = []
    target = torch.arange(vd) + d2t
    if t2d is not None and int(t2d.sum()) != vd:
        problems.append(f"t2d marks {int(t2d.sum())} target tokens but the draft vocabulary has {vd}")
    if vd > 1 and not bool((target[1:] > target[:-1]).all()):
        problems.append("d + d2t[d] is not strictly increasing (d2t must hold offsets, not absolute ids)")
    if bool(((target < 0) | (target >= v)).any()):
        problems.append(f"d + d2t[d] leaves the target vocabulary 0..{v - 1}")
    elif t2d is not None and not bool(t2d[target].all()):
        problems.append("t2d does not hold at d + d2t[d] for every draft token")
    if problems:
        raise VocabMapError(f"{source}: invalid draft-to-target vocabulary map:\n  " + "\n  ".join(problems))


def target_to_draft(t2d: torch.Tensor) -> torch.Tensor:
    """[V] draft id of each kept target token, -1 elsewhere (the inverse of d + d2t[d])."""
    out = torch.full(t2d.shape, -1, dtype=torch.long)
    out[t2d.cpu()] = torch.arange(int(t2d.sum()))
    return out


def make_vocab_map(kept: torch.Tensor, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(d2t, t2d) for the sorted target ids ``kept``."""
    kept = kept.sort().values
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[kept] = True
    return kept - torch.arange(kept.shape[0]), t2d
