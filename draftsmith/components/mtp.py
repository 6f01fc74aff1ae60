"""DeepSeek-V3 multi-token prediction (MTP / NextN) layer as a draft's fusion: ``fc`` holds ``enorm`` (norms the
token embedding), ``hnorm`` (norms the hidden state) and ``eh_proj`` [H, 2H] over cat([enorm(e), hnorm(h)]); the
decoder block after it is an ordinary registered layer, ``shared_head.norm`` is the draft's final norm and
``shared_head.head`` its head. Unlike EAGLE-3, the draft's own hidden state (deeper tree nodes) goes through the
same projection as the target's (vLLM ``deepseek_mtp.py``, SGLang ``deepseek_nextn.py``).

The checkpoint is the target's own files: tensors under ``model.layers.{num_hidden_layers}.``. Specs select that
layer with a ``${num_hidden_layers}`` placeholder in their weight rules (:mod:`draftsmith.components.rule_config`).
"""
from __future__ import annotations

import logging
from typing import Callable

import torch
from torch import nn

from draftsmith.components.layers import own_input
from draftsmith.components.norms import RMSNorm
from draftsmith.components.params import MTPParams

log = logging.getLogger("draftsmith")


class MTPFusion(nn.Module):
    """eh_proj(cat([enorm(embed), hnorm(hidden)])) -> H, for target and draft hidden states alike."""

    taps = None                      # the target hands over its final normed hidden state
    first_mix = staticmethod(own_input)
    first_in_factor = 1
    has_hidden_norm = False
    norm_before_residual = False
    norm_output = "head"             # shared_head.norm before the head; the pre-norm state is fed back

    def __init__(self, hidden: int, target_width: int, norm: Callable[[int], nn.Module], *,
                 zero_first_embedding: bool = True, hidden_first: bool = False):
        super().__init__()
        self.enorm = norm(hidden)
        self.hnorm = norm(target_width)
        self.eh_proj = nn.Linear(hidden + target_width, hidden, bias=False)
        self.zero_first_embedding, self.hidden_first = zero_first_embedding, hidden_first
        self.takes_positions = zero_first_embedding

    def fuse(self, emb: torch.Tensor, hidden: torch.Tensor, from_target: bool,
             pos: torch.Tensor | None = None) -> torch.Tensor:
        # emb: [B, T, H]; hidden: [B, T, Ht]; pos: [B, T] (position 0's embedding is zeroed when asked)
        if self.zero_first_embedding and pos is not None:
            emb = emb.masked_fill((pos == 0)[..., None], 0.0)
        e, h = self.enorm(emb), self.hnorm(hidden)
        return self.eh_proj(torch.cat((h, e) if self.hidden_first else (e, h), dim=-1))


def mtp(params: MTPParams, *, hidden: int, target_width: int, draft_config: dict,
        norm: Callable[[int], nn.Module] | None = None, **_) -> MTPFusion:
    n = draft_config.get("num_nextn_predict_layers") or draft_config.get("num_mtp_layers") or 1
    if isinstance(n, int) and n > 1:   # the specs' rules read layer L alone; the others were dropped unsaid
        L = draft_config.get("num_hidden_layers")
        log.warning("draftsmith: MTP draft: the checkpoint declares %d MTP layers (num_nextn_predict_layers); the "
                    "draft is the first, model.layers.%s, run at every draft step (as vLLM and SGLang run one), "
                    "and the tensors of the other %d are not read", n, L, n - 1)
    eps = float(draft_config.get("rms_norm_eps") or 1e-6)
    return MTPFusion(hidden, target_width, norm or (lambda dim: RMSNorm(dim, eps)),
                     zero_first_embedding=params.zero_first_embedding, hidden_first=params.order == "hidden_first")
