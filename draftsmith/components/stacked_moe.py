"""A target's mixture of experts whose routed experts are held as stacked tensors with biases (``moe: stacked``),
as transformers computes gpt-oss's (``GptOssMLP``, its eager experts):

- ``router.weight`` [experts, hidden] and ``router.bias``: each token's top_k logits, then a softmax over those
  alone (in the logits' dtype; no renormalisation, no scaling);
- ``experts.gate_up_proj`` [experts, hidden, 2W] (x @ it: stored transposed against a Linear's weight) and
  ``experts.gate_up_proj_bias`` [experts, 2W]; its 2W columns are gate | up halves or interleaved (gate 0::2, up
  1::2: gpt-oss), the ``gate_up`` param;
- the activation: ``(clamp(up, -limit, limit) + up_offset) * g * sigmoid(alpha * g)``, g = gate clamped above at
  limit (gpt-oss: limit the config's swiglu_limit, alpha its swiglu_alpha, else 1.702, up_offset 1);
- ``experts.down_proj`` [experts, W, hidden] and ``experts.down_proj_bias`` [experts, hidden].

What differs between types is data (:class:`~draftsmith.components.params.StackedMoEParams`, set per model_type in
targets.TARGETS); the names are the checkpoint's (transformers' save of the type), read as they are.

Cost: eagerly, each expert some token chose runs once over the rows that chose it, added in the order of experts
(transformers' loop, so the sums are the same); while a CUDA graph is being captured or torch.compile traces no row
can be looked up, so the chosen experts run as one grouped product over the stacked tensors, with their biases and
this activation (:mod:`~draftsmith.components.experts`, where the first eager call of a shape measured that it runs
and agrees, and a trace that it traces: moe.routed, as for ``moe: sparse``), else every expert over every row,
weighted by zero where it was not chosen (the same sums; n_experts / top_k times the work)."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from draftsmith.components import experts as grouped_experts
from draftsmith.components.dims import Dims
from draftsmith.components.moe import capturing, chosen_sum, dense, every_sum, routed
from draftsmith.components.params import StackedMoEParams
from draftsmith.components.target_refusals import moe_refusal, moe_sizes
from draftsmith.values import is_number


class TopKRouter(nn.Module):
    """``weight`` [experts, hidden] (and ``bias``): of each token, its top_k logits' experts and their softmax."""

    def __init__(self, hidden: int, experts: int, top_k: int, bias: bool = True):
        super().__init__()
        self.top_k = top_k
        self.weight = nn.Parameter(torch.empty(experts, hidden))
        self.bias = nn.Parameter(torch.empty(experts)) if bias else None

    def choose(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [tokens, hidden] -> the chosen experts [tokens, top_k] (by logit, highest first) and their weights."""
        top, chosen = F.linear(x, self.weight, self.bias).topk(self.top_k, dim=-1)
        return chosen, top.softmax(dim=-1, dtype=top.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [tokens, hidden] -> [tokens, experts], the chosen experts' weights (0 where not chosen)."""
        chosen, weights = self.choose(x)
        return dense(chosen, weights, self.weight.shape[0])


class StackedExperts(nn.Module):
    """The routed experts as four stacked tensors, under the checkpoint's names (the module's docstring)."""

    def __init__(self, experts: int, hidden: int, width: int, *, interleaved: bool, limit: float | None,
                 alpha: float, up_offset: float):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.empty(experts, hidden, 2 * width))
        self.gate_up_proj_bias = nn.Parameter(torch.empty(experts, 2 * width))
        self.down_proj = nn.Parameter(torch.empty(experts, width, hidden))
        self.down_proj_bias = nn.Parameter(torch.empty(experts, hidden))
        self.interleaved, self.limit, self.alpha, self.up_offset = interleaved, limit, alpha, up_offset

    def act(self, gate_up: torch.Tensor) -> torch.Tensor:
        gate, up = (gate_up[..., ::2], gate_up[..., 1::2]) if self.interleaved else gate_up.chunk(2, dim=-1)
        if self.limit is not None:
            gate, up = gate.clamp(max=self.limit), up.clamp(min=-self.limit, max=self.limit)
        return (up + self.up_offset) * (gate * torch.sigmoid(gate * self.alpha))

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert ``e`` over rows x [n, hidden] -> [n, hidden]."""
        h = x @ self.gate_up_proj[e] + self.gate_up_proj_bias[e]
        return self.act(h) @ self.down_proj[e] + self.down_proj_bias[e]

    def chosen_experts(self, flat: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Each expert some row chose, over those rows, added in the order of experts (transformers' loop)."""
        return chosen_sum(self.expert, flat, weights)

    def every_expert(self, flat: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Every expert over every row, weighted by zero where not chosen (the same sums; a CUDA graph's path)."""
        return every_sum(self.expert, flat, weights)

    def key(self, x: torch.Tensor, top_k: int) -> tuple:
        """The grouped form's verdict key (experts.VERDICTS): the tensors' shapes and strides, the activation's
        settings, x's dtype and device, top_k."""
        tensors = (self.gate_up_proj, self.gate_up_proj_bias, self.down_proj, self.down_proj_bias)
        shapes = tuple((tuple(t.shape), t.stride()) for t in tensors)
        return ("stacked", shapes, self.interleaved, self.limit, self.alpha, self.up_offset), x.dtype, top_k, x.device

    def valid(self) -> bool:
        """Whether the grouped form may read these tensors (experts.plain: not FP8, one dtype, a device of
        experts.DEVICES)."""
        return grouped_experts.plain([self.gate_up_proj, self.gate_up_proj_bias, self.down_proj, self.down_proj_bias])

    def grouped_args(self, eager: bool = False) -> dict:
        """experts.grouped's keyword arguments: its [E, 2W, H] and [E, H, W] views of the stacked tensors, the biases
        and :meth:`act` (``eager``: as it is)."""
        return {"gate_up": self.gate_up_proj.transpose(1, 2), "down": self.down_proj.transpose(1, 2),
                "gate_up_bias": self.gate_up_proj_bias, "down_bias": self.down_proj_bias, "act": self.act}

    def extra_repr(self) -> str:
        E, H, W2 = self.gate_up_proj.shape
        return (f"experts={E}, hidden={H}, width={W2 // 2}, gate_up={'interleaved' if self.interleaved else 'halves'}"
                f", limit={self.limit}, alpha={self.alpha}, up_offset={self.up_offset}")


class StackedMoE(nn.Module):
    def __init__(self, router: TopKRouter, experts: StackedExperts):
        super().__init__()
        self.router, self.experts = router, experts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        chosen, w = self.router.choose(flat)   # [tokens, top_k] each
        static = capturing(x) or torch.compiler.is_compiling()   # no row can be looked up in a graph, nor traced
        e = self.experts
        return routed(e, flat, chosen, w, e.gate_up_proj.shape[0], static, e.chosen_experts, e.every_expert).view_as(x)


def stacked_moe(params: StackedMoEParams, *, dims: Dims) -> StackedMoE:
    """Factory of the ``moe: stacked`` component: its sizes and activation read from the config's keys that
    ``params`` name; a value it does not compute is refused naming the config's file and key (before any tensor is
    read: a target is built on meta first)."""
    cfg = dims.config

    def refuse(key: str, found: Any, allowed: str) -> Exception:
        return moe_refusal(cfg, key, found, allowed)

    experts, width, top_k = moe_sizes(cfg, (params.experts_key, params.intermediate_key, params.top_k_key))
    if top_k > experts:
        raise refuse(params.top_k_key, top_k, f"1..{experts} (the experts a token may choose from)")
    limit = getattr(cfg, params.limit_key, None) if params.limit_key else None
    if limit is not None and not (is_number(limit) and limit > 0):
        raise refuse(params.limit_key, limit, "a positive number (the clamp of the experts' gate and up), or null")
    alpha = getattr(cfg, params.alpha_key, None) if params.alpha_key else None
    alpha = params.alpha if alpha is None else alpha
    if not (is_number(alpha) and alpha > 0):
        raise refuse(params.alpha_key, alpha, "a positive number (the gain of the experts' sigmoid)")
    return StackedMoE(TopKRouter(dims.hidden, experts, top_k, params.router_bias),
                      StackedExperts(experts, dims.hidden, width, interleaved=params.gate_up == "interleaved",
                                     limit=None if limit is None else float(limit), alpha=float(alpha),
                                     up_offset=params.up_offset))
