"""Fusion layers: how a draft turns (token embedding, target hidden state) into its first layer's input.

A fusion module is the draft's ``fc`` (its parameters are the canonical ``fc.*``). It also decides, as data,
what the target must hand over (``taps``: layer inputs to capture, or None for the final normed hidden state),
how the first decoder layer forms its attention input (``first_mix``, ``first_in_factor``) and where the draft's
final norm goes (``norm_output``: ``none`` | ``head`` | ``feed_back``).

EAGLE-3 relatives are params of one component: per-aux norms before fc (``fc_norm``: canonical
``fc.aux_norm.{i}.weight``, EAGLE 3.1), one norm over the concatenated aux states (``norm_before_fc``: canonical
``fc.input_norm.weight``, gpt-oss style), ``norm_before_residual`` and ``norm_output``; all resolved by
:mod:`draftsmith.components.eagle3_config`.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Callable

import torch
from torch import nn

from draftsmith.components.eagle3_config import resolve_eagle3
from draftsmith.components.layers import embed_concat, own_input
from draftsmith.components.norms import RMSNorm
from draftsmith.components.params import Eagle1Params, Eagle3Params
from draftsmith.errors import Problem, SpecError

log = logging.getLogger("draftsmith")


class Eagle1Fusion(nn.Linear):
    """fc over cat([embed(x_{t+1}), h_t]) -> H, for target and draft hidden states alike."""

    taps = None
    first_mix = staticmethod(own_input)
    first_in_factor = 1
    has_hidden_norm = False
    norm_before_residual = False
    norm_output = "head"

    def __init__(self, hidden: int, target_width: int, bias: bool, reading: str = "",
                 embed_norm: nn.Module | None = None):
        super().__init__(hidden + target_width, hidden, bias=bias)
        self.target_width = target_width   # the last target_width inputs are the target's state
        self.reading = reading             # why fc has a bias or not (eagle1_bias), for a load whose fc.bias misfits
        if embed_norm is not None:         # a norm on the embedding before fc (else none: no identity slot, so
            self.embed_norm = embed_norm   # the state dict holds no such name)

    def bias_note(self, held: bool) -> str | None:
        """The note for a load whose checkpoint holds ``fc.bias`` (``held``) and this fc has none, or the reverse;
        None when they agree."""
        if held == (self.bias is not None):
            return None
        if held:
            return (f"note: the checkpoint holds fc.bias and the fusion is built without a bias ({self.reading}): "
                    "state fusion.bias: true, or auto to read the draft config")
        return (f"note: the fusion expects fc.bias, which the checkpoint does not hold ({self.reading}): state "
                "fusion.bias: false")

    def fuse(self, emb: torch.Tensor, hidden: torch.Tensor, from_target: bool) -> torch.Tensor:
        # emb: [B, T, H]; hidden: [B, T, Ht] -> [B, T, H]
        if hasattr(self, "embed_norm"):
            emb = self.embed_norm(emb)
        return super().forward(torch.cat((emb, hidden), dim=-1))


class Eagle3Fusion(nn.Linear):
    """fc over the k concatenated aux states of the target (k*Ht -> H), optionally normed per aux state or as a
    whole first; the draft's own hidden states (deeper tree nodes) bypass it. The first layer attends over
    cat([norm(embed), hidden_norm(h)])."""

    first_mix = staticmethod(embed_concat)
    first_in_factor = 2
    has_hidden_norm = True

    def __init__(self, hidden: int, target_width: int, taps: tuple[int, ...], norm_before_residual: bool, *,
                 norm_output: str = "head", aux_norm: nn.ModuleList | None = None, input_norm: nn.Module | None = None):
        super().__init__(len(taps) * target_width, hidden, bias=False)
        self.target_width = target_width   # each tap's width (published configs list taps deepest last)
        self.taps, self.norm_before_residual, self.norm_output = taps, norm_before_residual, norm_output
        if aux_norm is not None:
            self.aux_norm = aux_norm
        if input_norm is not None:
            self.input_norm = input_norm

    def shape_note(self, held: tuple[int, ...]) -> str | None:
        """What a load says where the checkpoint's fc.weight (``held``) reads another count of the target's hidden
        states than the taps this fusion was built with: the fields that set the count; None otherwise."""
        if len(held) != 2 or held[1] == self.in_features or not held[1] or held[1] % self.target_width:
            return None
        n = held[1] // self.target_width
        return (f"note: the checkpoint's fc.weight reads {n} hidden state{'s' * (n != 1)} of the target ({held[1]} = "
                f"{n} x {self.target_width}) and the draft's fusion {len(self.taps)} (taps {list(self.taps)}): "
                f"draft.fusion.aux_layers.ids (or num_aux, or the draft config's tap ids) must name {n} layers")

    def fuse(self, emb: torch.Tensor, hidden: torch.Tensor, from_target: bool) -> torch.Tensor:
        # hidden: [B, T, k*Ht] (target) -> [B, T, H]; or the draft's own [B, T, H], passed through
        if not from_target:
            return hidden
        if hasattr(self, "aux_norm"):
            chunks = hidden.chunk(len(self.aux_norm), dim=-1)
            hidden = torch.cat([norm(c) for norm, c in zip(self.aux_norm, chunks)], dim=-1)
        if hasattr(self, "input_norm"):
            hidden = self.input_norm(hidden)
        return super().forward(hidden)


def eagle1(params: Eagle1Params, *, hidden: int, target_width: int, draft_config: dict,
           norm: Callable[[int], nn.Module] | None = None, **_) -> Eagle1Fusion:
    if hidden != target_width:
        # the draft's own output goes back through fc in place of a target state, and through the target's head
        raise SpecError("draft fusion", [Problem("draft.fusion.kind", f"eagle1 needs the draft's hidden size "
                                                 f"({hidden}) to equal the target's ({target_width}): its own "
                                                 "outputs replace target states in fc and go through the "
                                                 "target's lm_head")])
    bias, reading, note = eagle1_bias(params.bias, draft_config)
    if note:  # once per draft build, where the user sees it
        log.warning("EAGLE-1 draft: %s", note)
    return Eagle1Fusion(hidden, target_width, bias, reading, norm(hidden) if params.embed_norm else None)


BIAS_KEYS = ("bias", "fusion_bias")   # the draft config keys of fc's bias: EAGLE's, then speculators'


def config_bias(draft_config: Mapping[str, Any]) -> tuple[str, Any]:
    """(the key, its value) of the first of :data:`BIAS_KEYS` the draft config states; ("bias", None) for none."""
    return next(((k, draft_config[k]) for k in BIAS_KEYS if draft_config.get(k) is not None), ("bias", None))


def eagle1_bias(stated: bool | str, draft_config: dict) -> tuple[bool, str, str | None]:
    """(whether fc has a bias, why, the load note or None): the spec's ``fusion.bias``, else (auto) the draft config's
    ``bias`` (speculators: ``fusion_bias``), and a MISSING key means true (the EAGLE reference's default: the Vicuna
    and LLaMA2-chat drafts have no key and do have fc.bias). A spec that contradicts the config is said; the default
    taken is said only by a load whose checkpoint does not fit it (:meth:`Eagle1Fusion.bias_note`)."""
    key, config = config_bias(draft_config)
    if stated == "auto" and config is None:
        # no note: the standard layout (yuhuili's) has no key and holds fc.bias, so a load that fits says nothing;
        # one whose checkpoint lacks fc.bias is told the field by the load's bias_note, with this reading
        return True, 'the draft config has no "bias" key, which reads as true, the EAGLE reference\'s default', None
    if stated == "auto":
        return bool(config), f'fusion.bias auto read the draft config\'s "{key}": {str(config).lower()}', None
    said = f"the spec's fusion.bias: {str(stated).lower()}"
    if config is None or bool(config) == stated:
        return stated, said, None
    contradiction = f'{said} contradicts the draft config\'s "{key}": {str(config).lower()}'
    return stated, contradiction, f"{contradiction}; the spec wins"


def eagle3(params: Eagle3Params, *, hidden: int, target_width: int, draft_config: dict, target_layers: int,
           norm: Callable[[int], nn.Module] | None = None, **_) -> Eagle3Fusion:
    deferred: list = []   # tap ids out of range or repeated: the assembler says them with the tensors' problems
    facts = resolve_eagle3(params, draft_config, target_layers, deferred)
    if facts.notes:  # once per draft build, on one line, where the user sees it
        log.warning("EAGLE-3 draft: %s", "; ".join(facts.notes))
    eps = float(draft_config.get("rms_norm_eps") or 1e-6)
    norm = norm or (lambda dim: RMSNorm(dim, eps))
    k = len(facts.taps)
    fusion = Eagle3Fusion(
        hidden, target_width, facts.taps, facts.norm_before_residual, norm_output=facts.norm_output,
        aux_norm=nn.ModuleList([norm(target_width) for _ in range(k)]) if facts.fc_norm else None,
        input_norm=norm(k * target_width) if facts.norm_before_fc else None)
    if deferred:   # raised as ever, with the module stand-in taps build (the same shapes): build_draft checks the
        error = SpecError("draft fusion", deferred)   # tensors with it and says both
        error.built = fusion
        raise error
    return fusion
