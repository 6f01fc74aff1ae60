"""The two assembled modules. Their parameter names are the canonical layouts: the target's are Hugging Face's
(``model.layers.N.self_attn.q_proj.weight``), the draft's are ``fc.*``, ``layers.N.*``, ``norm.*``,
``lm_head.*``, ``d2t``, ``t2d``; upstream layouts are translated to these by a spec's weight rules."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from draftsmith.components.dims import Dims


class CausalLM(nn.Module):
    """A Llama-family decoder LM (target)."""

    def __init__(self, dims: Dims, layers: Sequence[nn.Module], final_norm: nn.Module, tie: bool):
        super().__init__()
        self.dims = dims
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(dims.vocab, dims.hidden)
        self.model.layers = nn.ModuleList(layers)
        self.model.norm = final_norm
        self.lm_head = nn.Linear(dims.hidden, dims.vocab, bias=False)
        self.tie = tie
        self.tie_weights()

    def tie_weights(self) -> None:
        if self.tie:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, ids: torch.Tensor, pos: torch.Tensor, kv=None, taps: Sequence[int] = ()):
        # ids, pos: [B, T] -> hidden [B, T, H] after the final norm, aux [B, T, len(taps) * H] or None
        x = self.model.embed_tokens(ids)
        captured = {}
        for i, layer in enumerate(self.model.layers):
            if i in taps:
                captured[i] = x
            x = layer(x, pos, kv)
        if len(self.model.layers) in taps:
            captured[len(self.model.layers)] = x
        aux = torch.cat([captured[i] for i in taps], dim=-1) if taps else None
        return self.model.norm(x), aux

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)


class DraftModel(nn.Module):
    """fc (the fusion) -> decoder layers -> optional final norm -> head over the target or a reduced vocabulary."""

    def __init__(self, fc: nn.Module, layers: Sequence[nn.Module], norm: nn.Module | None, *,
                 lm_head: nn.Module | None, draft_vocab: int | None, target_vocab: int, feed_post_norm: bool,
                 head_norm: bool = True):
        super().__init__()
        self.fc = fc
        self.layers = nn.ModuleList(layers)
        self.norm = norm or nn.Identity()
        if lm_head is not None:
            self.lm_head = lm_head
        self.target_vocab, self.feed_post_norm, self.head_norm = target_vocab, feed_post_norm, head_norm
        self.compute_dtype: torch.dtype | None = None   # set by assemble(): casts what the target hands over
        if draft_vocab is not None:
            self.register_buffer("d2t", torch.zeros(draft_vocab, dtype=torch.int64))
            self.register_buffer("t2d", torch.zeros(target_vocab, dtype=torch.bool))

    @property
    def taps(self):
        return self.fc.taps

    def forward(self, ids: torch.Tensor, hidden: torch.Tensor, pos: torch.Tensor, kv=None, *, embed: nn.Module,
                from_target: bool):
        # ids, pos: [B, T]; hidden: [B, T, Ht*k] (target) or [B, T, H] (draft's own) -> (out, feed): [B, T, H]
        emb = embed(ids)
        if self.compute_dtype is not None:  # the target's embedding and hand-over meet a draft of another dtype
            emb, hidden = emb.to(self.compute_dtype), hidden.to(self.compute_dtype)
        # a fusion that declares `takes_positions` also gets pos (MTP zeroes the embedding at position 0)
        x = (self.fc.fuse(emb, hidden, from_target, pos) if getattr(self.fc, "takes_positions", False)
             else self.fc.fuse(emb, hidden, from_target))
        for layer in self.layers:
            x = layer(x, pos, kv, emb)
        return x, (self.norm(x) if self.feed_post_norm else x)

    def head_logits(self, out: torch.Tensor, head: nn.Module) -> torch.Tensor:
        # out: [B, T, H] -> [B, T, Vd] over the draft's own vocabulary (Vd = V_target without a reduced head):
        # what drafting ranks, so a reduced head never pays for the target's vocabulary
        x = self.norm(out) if self.head_norm else out
        w = getattr(head, "weight", None)
        return head(x if w is None or w.dtype == x.dtype or w.itemsize == 1 else x.to(w.dtype))  # a shared target head

    def target_ids(self, idx: torch.Tensor) -> torch.Tensor:
        # draft ids [...] -> target ids [...]: d + d2t[d] (the identity without a reduced head)
        return idx + self.d2t[idx] if hasattr(self, "d2t") else idx

    def kept_ids(self) -> torch.Tensor:
        # [Vd] the target id of each draft id: d + d2t[d], or every target id without a reduced head
        if hasattr(self, "d2t"):
            return torch.arange(self.d2t.shape[0], device=self.d2t.device) + self.d2t
        return torch.arange(self.target_vocab, device=next(self.parameters()).device)

    def to_target(self, z: torch.Tensor) -> torch.Tensor:
        # [..., Vd] -> [..., V_target]: each draft logit at its target id, -inf elsewhere
        if not hasattr(self, "d2t"):
            return z
        full = z.new_full((*z.shape[:-1], self.target_vocab), float("-inf"))
        return full.index_copy_(-1, self.kept_ids(), z)

    def logits(self, out: torch.Tensor, head: nn.Module) -> torch.Tensor:
        # out: [B, T, H] -> [B, T, V_target]
        return self.to_target(self.head_logits(out, head))
