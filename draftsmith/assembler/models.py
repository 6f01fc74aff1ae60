"""The two assembled modules. Their parameter names are the canonical layouts: the target's are Hugging Face's
(``model.layers.N.self_attn.q_proj.weight``), the draft's are ``fc.*``, ``layers.N.*``, ``norm.*``,
``lm_head.*``, ``d2t``, ``t2d``; upstream layouts are translated to these by a spec's weight rules."""
from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
from torch import nn

from draftsmith.components.dims import Dims
from draftsmith.components.fused import cat_sums, kernel
from draftsmith.components.norms import add_then_norm
from draftsmith.components.quant_models import weight_dtype
from draftsmith.registry.results import ComponentFailed, made_by


def _settle(x: torch.Tensor, pending: torch.Tensor | None) -> torch.Tensor:
    return x if pending is None else x + pending


@functools.cache
def _splits(cls: type) -> bool:
    # split_forward stands for the layer's forward only where it is that forward split in two: the class that
    # defines split_forward is the one that defines forward, or a subclass of it (a subclass that overrides
    # forward alone keeps its forward)
    mro = cls.__mro__
    fwd = next((c for c in mro if "forward" in c.__dict__), None)
    split = next((c for c in mro if "split_forward" in c.__dict__), None)
    return fwd is not None and split is not None and issubclass(split, fwd)


def run_layers(layers: Sequence[nn.Module], x: torch.Tensor, pos: torch.Tensor, kv=None, emb=None,
               taps: Sequence[int] = ()) -> tuple[torch.Tensor, torch.Tensor | None, dict[int, torch.Tensor]]:
    """A stack of decoder layers over the residual stream x + pending: a layer with ``split_forward`` (defined with
    or after its ``forward``: a subclass that overrides forward alone runs its forward) leaves its last residual
    add to the next layer's input norm, so the caller's final norm adds the last one (one kernel
    per layer fewer). Returns (x, pending, {tap: the stream at layer tap's input as (x, pending), its add left to
    whoever reads it (:func:`~draftsmith.components.fused.cat_sums`: one kernel for every tap); len(layers): the
    output})."""
    pending, captured = None, {}
    for i, layer in enumerate(layers):
        if i in taps:
            captured[i] = x, pending
        if not _splits(type(layer)):   # another layer type: its own forward, called as the models always called it
            args = (pos, kv) if emb is None else (pos, kv, emb)
            x, pending = layer(_settle(x, pending), *args), None
        else:
            x, pending = layer.split_forward(x, pos, kv, emb, pending=pending)
    if len(layers) in taps:
        captured[len(layers)] = x, pending
    return x, pending, captured


class CausalLM(nn.Module):
    """A Llama-family decoder LM (target)."""

    def __init__(self, dims: Dims, layers: Sequence[nn.Module], final_norm: nn.Module, tie: bool,
                 recurrent: bool = False, embed_scale: float | None = None, logit_cap: float | None = None):
        super().__init__()
        self.dims = dims
        # the token embedding's factor, in the model's dtype (Gemma's sqrt(hidden_size)): the target's forward's
        # only (a draft embeds with embed_tokens as it is); the logits' tanh cap (Gemma-2's final_logit_softcapping)
        self.embed_scale, self.logit_cap = embed_scale, logit_cap
        self.recurrent = recurrent  # has recurrent layers: its state cannot be rolled back (rules out spec v2)
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(dims.vocab, dims.hidden)
        self.model.layers = nn.ModuleList(layers)
        self.model.norm = final_norm
        self.lm_head = nn.Linear(dims.hidden, dims.vocab, bias=False)
        self.tie = tie
        self.tie_weights()
        self.fused = False   # fused.fuse_model: the taps' adds and concatenation as one compiled kernel on CUDA

    def tie_weights(self) -> None:
        if self.tie:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, ids: torch.Tensor, pos: torch.Tensor, kv=None, taps: Sequence[int] = ()):
        # ids, pos: [B, T] -> hidden [B, T, H] after the final norm, aux [B, T, len(taps) * H] or None
        x = self.model.embed_tokens(ids)
        if self.embed_scale is not None:   # the factor rounded to the dtype first, as transformers' Gemma
            x = x * torch.tensor(self.embed_scale, dtype=torch.float32).to(x.dtype)
        x, pending, captured = run_layers(self.model.layers, x, pos, kv, taps=taps)
        aux = kernel(cat_sums, self.fused)([captured[i] for i in taps]) if taps else None
        return add_then_norm(self.model.norm, x, pending)[1], aux

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.capped(self.lm_head(hidden))

    def capped(self, logits: torch.Tensor) -> torch.Tensor:
        """The lm_head's logits (or any of their columns: training's kept ids) as the target gives them: capped by
        tanh at ``logit_cap`` where it has one (Gemma's final_logit_softcapping)."""
        return logits if self.logit_cap is None else torch.tanh(logits / self.logit_cap) * self.logit_cap


class DraftModel(nn.Module):
    """fc (the fusion) -> decoder layers -> optional final norm -> head over the target or a reduced vocabulary."""

    derivable = ("t2d",)   # persistent buffers a checkpoint may leave out: reset_buffers computes them (load.py)
    copies: tuple[str, ...] = ()   # tensors a checkpoint may hold that it does not read (the target's, copied)

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

    def reset_buffers(self, device) -> None:
        """t2d from d2t where the checkpoint held none (or a spec ignores it): the target ids d + d2t[d] marked."""
        if hasattr(self, "t2d") and self.t2d.is_meta:
            self.t2d = torch.zeros(self.target_vocab, dtype=torch.bool, device=device).index_fill_(
                0, self.kept_ids().to(device), True)

    def forward(self, ids: torch.Tensor, hidden: torch.Tensor, pos: torch.Tensor, kv=None, *, embed: nn.Module,
                from_target: bool, head_input: bool = False):
        # ids, pos: [B, T]; hidden: [B, T, Ht*k] (target) or [B, T, H] (draft's own) -> (out, feed): [B, T, H];
        # head_input: (out, feed, what the head reads), the last residual add and the final norm in one kernel
        # (the decoding engine's call; :meth:`head_of` then takes the third, where head_logits(out) norms again)
        emb = embed(ids)
        if self.compute_dtype is not None:  # the target's embedding and hand-over meet a draft of another dtype
            emb, hidden = emb.to(self.compute_dtype), hidden.to(self.compute_dtype)
        # a fusion that declares `takes_positions` also gets pos (MTP zeroes the embedding at position 0)
        x = (self.fc.fuse(emb, hidden, from_target, pos) if getattr(self.fc, "takes_positions", False)
             else self.fc.fuse(emb, hidden, from_target))
        if x.shape != emb.shape or (x.dtype != emb.dtype and not torch.is_autocast_enabled(x.device.type)):
            # a plugin's fusion: said as its own, not later as ours (under autocast a product's dtype is autocast's)
            who = made_by(self.fc) or f"the draft's fusion ({type(self.fc).__module__}.{type(self.fc).__qualname__})"
            raise ComponentFailed(f"{who}: its fuse(emb [{', '.join(map(str, emb.shape))}], ...) returned "
                                  f"[{', '.join(map(str, x.shape))}] {str(x.dtype).removeprefix('torch.')}; fuse "
                                  f"returns [B, T, hidden] in emb's dtype ({str(emb.dtype).removeprefix('torch.')})")
        x, pending, _ = run_layers(self.layers, x, pos, kv, emb)
        if self.feed_post_norm or (head_input and self.head_norm):
            x, normed = add_then_norm(self.norm, x, pending)
        else:
            x = normed = _settle(x, pending)
        feed = normed if self.feed_post_norm else x
        return (x, feed, normed if self.head_norm else x) if head_input else (x, feed)

    def head_logits(self, out: torch.Tensor, head: nn.Module) -> torch.Tensor:
        # out: [B, T, H] -> [B, T, Vd] over the draft's own vocabulary (Vd = V_target without a reduced head):
        # what drafting ranks, so a reduced head never pays for the target's vocabulary
        return self.head_of(self.norm(out) if self.head_norm else out, head)

    def head_of(self, x: torch.Tensor, head: nn.Module) -> torch.Tensor:
        # x: [B, T, H] what the head reads (after the final norm where there is one) -> [B, T, Vd]
        dt = weight_dtype(head)   # an FP8 head's compute dtype: reading its weight would dequantize it whole
        return head(x if dt is None or dt == x.dtype or dt.itemsize == 1 else x.to(dt))  # a shared target head

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
