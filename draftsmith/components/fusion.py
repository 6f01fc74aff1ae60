"""Fusion layers: how a draft turns (token embedding, target hidden state) into its first layer's input.

A fusion module is the draft's ``fc`` (its parameters are the canonical ``fc.*``). It also decides, as data,
what the target must hand over (``taps``: layer inputs to capture, or None for the final normed hidden state)
and how the first decoder layer forms its attention input (``first_mix``, ``first_in_factor``).
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator
from torch import nn

from draftsmith.components.layers import embed_concat, own_input


class Eagle1Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    bias: Literal["auto"] | bool = "auto"    # auto: the draft config's `bias`, and a MISSING key means true


class AuxLayers(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    ids: tuple[int, ...] | None = None       # None: eagle_config ids from the draft config, else [2, L//2, L-3]
    at: Literal["input", "output"] = "input"  # ids name layer inputs (HF hidden_states[id], vLLM) or outputs (SGLang)

    @field_validator("ids")
    @classmethod
    def _distinct(cls, ids):
        if ids is not None and len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"{list(ids)} names layer(s) {dup} more than once; taps must be distinct")
        return ids


class Eagle3Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    norm_before_residual: bool               # required: engines disagree on the default, so a spec says it
    aux_layers: Literal["auto"] | AuxLayers = "auto"
    num_aux: int | None = Field(None, ge=1)  # explicit count > len(ids) > 3


class Eagle1Fusion(nn.Linear):
    """fc over cat([embed(x_{t+1}), h_t]) -> H, for target and draft hidden states alike."""

    taps = None
    first_mix = staticmethod(own_input)
    first_in_factor = 1
    has_hidden_norm = False
    norm_before_residual = False

    def __init__(self, hidden: int, target_width: int, bias: bool):
        super().__init__(hidden + target_width, hidden, bias=bias)

    def fuse(self, emb: torch.Tensor, hidden: torch.Tensor, from_target: bool) -> torch.Tensor:
        return super().forward(torch.cat((emb, hidden), dim=-1))


class Eagle3Fusion(nn.Linear):
    """fc over the k concatenated aux states of the target (k*Ht -> H); the draft's own hidden states (deeper
    tree nodes) bypass it. The first layer attends over cat([norm(embed), hidden_norm(h)])."""

    first_mix = staticmethod(embed_concat)
    first_in_factor = 2
    has_hidden_norm = True

    def __init__(self, hidden: int, target_width: int, taps: tuple[int, ...], norm_before_residual: bool):
        super().__init__(len(taps) * target_width, hidden, bias=False)
        self.taps, self.norm_before_residual = taps, norm_before_residual

    def fuse(self, emb: torch.Tensor, hidden: torch.Tensor, from_target: bool) -> torch.Tensor:
        return super().forward(hidden) if from_target else hidden


def eagle1(params: Eagle1Params, *, hidden: int, target_width: int, draft_config: dict, **_) -> Eagle1Fusion:
    if hidden != target_width:
        # the draft's own output goes back through fc in place of a target state, and through the target's head
        from draftsmith.specs.errors import Problem, SpecError

        raise SpecError("draft fusion", [Problem("draft.fusion.kind", f"eagle1 needs the draft's hidden size "
                                                 f"({hidden}) to equal the target's ({target_width}): its own "
                                                 "outputs replace target states in fc and go through the "
                                                 "target's lm_head")])
    bias = draft_config.get("bias", True) if params.bias == "auto" else params.bias
    return Eagle1Fusion(hidden, target_width, bool(bias))


def eagle3(params: Eagle3Params, *, hidden: int, target_width: int, draft_config: dict, target_layers: int,
           **_) -> Eagle3Fusion:
    from draftsmith.assembler.taps import resolve_taps

    taps = resolve_taps(params, draft_config, target_layers)
    return Eagle3Fusion(hidden, target_width, taps, params.norm_before_residual)
