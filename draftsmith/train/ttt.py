"""EAGLE-3's training-time test (TTT): the draft feeds itself ``steps`` times over a window of cached target
features, through draftsmith's own draft model and attention code, exactly as deeper tree nodes see it.

Anchor i, step s reads token x[i+1+s] at position i+s and must predict the target's next token at i+1+s.
Step 0 fuses the target's state at i (the aux taps, or for EAGLE-1 the last hidden state); step s > 0 takes the
draft's own fed-back state from step s-1 at the same anchor. The label is the target's distribution at i+1+s
restricted to the draft vocabulary (softmax of the target's logits over the kept ids: soft cross-entropy),
counted where the target's greedy token is in that vocabulary; top-1 accuracy counts every anchor.
"""
from __future__ import annotations

import torch

from draftsmith.components.attention import KVBatch
from draftsmith.train.checks import LABELS


class StepPool:
    """Stands in for the paged KV pool while training: it keeps every TTT step's K/V (with their autograd graph)
    so step s can attend to step 0's prefix and to its own chain, through draftsmith's own attention code."""

    def __init__(self, B: int, T: int):
        self.B, self.T, self.kv = B, T, {}

    def write(self, layer: int, slots, **new: torch.Tensor) -> None:
        # new: {name: [B * T, *shape]} (the layer's cache layout), one entry per TTT step
        self.kv.setdefault(layer, []).append({name: t.reshape(self.B, self.T, *t.shape[1:]) for name, t in new.items()})

    def read(self, layer: int, slots) -> dict[str, torch.Tensor]:
        steps = self.kv[layer]
        return {name: torch.cat([step[name] for step in steps], 1) for name in steps[0]}


def ttt_mask(B: int, T: int, s: int, device=None) -> torch.Tensor:
    """[B, 1, T, (s+1)T]: step s at anchor i sees step 0 at anchors <= i and steps 1..s at anchor i only,
    exactly what a depth-s tree node sees at inference (the committed prefix, its ancestors and itself)."""
    blocks = [torch.ones(T, T, dtype=torch.bool, device=device).tril()]
    blocks += [torch.eye(T, dtype=torch.bool, device=device)] * s
    return torch.cat(blocks, 1)[None, None].expand(B, 1, T, (s + 1) * T)


def ttt_losses(model, batch: dict[str, torch.Tensor], steps: int, decay: float = 0.8,
               kept: torch.Tensor | None = None, labels: str = "soft") -> tuple[torch.Tensor, list[float]]:
    """batch: ids [B, S], hidden [B, S, H], top [B, S] and (EAGLE-3) aux [B, S, k*Ht], all from the target.
    labels: "soft" (the target's distribution over the kept ids) or "hard" (its greedy token; no projection of
    the target's hidden state, so cheaper). Returns sum_s decay**s * loss_s and each step's top-1 accuracy (the
    draft's argmax == the target's greedy token)."""
    if labels not in LABELS:
        raise ValueError(f"labels must be 'soft' or 'hard', not {labels!r}")
    draft, head_w = model.draft, model.target.lm_head.weight
    kept = draft.kept_ids() if kept is None else kept
    ids, top = batch["ids"].long(), batch["top"].long()
    B, T = ids.shape[0], ids.shape[1] - steps
    dev, dt = head_w.device, head_w.dtype
    feed = (batch["aux"] if draft.taps else batch["hidden"])[:, :T].to(dev, dt)
    pool, loss, acc = StepPool(B, T), 0.0, []
    w_kept = head_w[kept]                                                           # [Vd, H]
    for s in range(steps):
        kv = KVBatch(pool, torch.zeros(B, T, dtype=torch.long), None, ttt_mask(B, T, s, dev))
        pos = torch.arange(s, s + T, device=dev).expand(B, -1)
        out, feed = draft(ids[:, 1 + s: 1 + s + T].to(dev), feed, pos, kv, embed=model.draft_embed,
                          from_target=s == 0)
        logq = draft.head_logits(out, model.draft_head).float().log_softmax(-1)     # [B, T, Vd], as decoding
        want = top[:, 1 + s: 1 + s + T].to(dev).contiguous()
        ok = torch.isin(want, kept)
        if labels == "hard":
            ce = -logq.gather(-1, torch.searchsorted(kept, want).clamp(max=len(kept) - 1)[..., None])[..., 0]
        else:
            with torch.no_grad():
                # the target's logits over the kept ids (capped as its own: Gemma's final_logit_softcapping)
                p = model.target.capped(batch["hidden"][:, 1 + s: 1 + s + T].to(dev, dt) @ w_kept.T).float().softmax(-1)
            ce = -(p * logq).sum(-1)
        loss = loss + decay**s * (ce * ok).sum() / ok.sum().clamp(min=1)
        acc.append((kept[logq.argmax(-1)] == want).float().mean().item())
    return loss, acc
