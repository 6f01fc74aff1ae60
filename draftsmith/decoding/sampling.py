"""Target and draft distributions from logits: temperature, top-k, top-p."""

from __future__ import annotations

import torch
from torch import Tensor


def as_float(x: Tensor) -> Tensor:
    # probabilities and logits are computed in float32 (float64 kept): half precision is upcast
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _shifted(x: Tensor) -> Tensor:
    # x minus its row maximum (softmax is shift-invariant, the order is kept): dividing it by a tiny temperature
    # gives 0 for the maximum and -inf (never inf, hence never NaN) for the rest; a row of -inf stays as it is
    top = x.amax(dim=-1, keepdim=True)
    return x - top.masked_fill(~torch.isfinite(top), 0)


def target_probs(logits: Tensor, temperature: float, top_p: float = 1.0, top_k: int = 0) -> Tensor:
    # logits: [..., V] -> probs [..., V] (float32, or float64 if given): softmax(logits / T) restricted to the
    # top_k tokens (0 = all; ties with the k-th are kept, as in transformers), then to the smallest set of most
    # likely tokens whose mass reaches top_p, renormalised
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k}")
    x = _shifted(as_float(logits)) / temperature
    if 0 < top_k < x.shape[-1]:
        kth = torch.topk(x, top_k, dim=-1).values[..., -1:]                    # [..., 1]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p < 1:
        probs, order = torch.sort(torch.softmax(x, dim=-1), dim=-1, descending=True, stable=True)
        before = probs.cumsum(-1) - probs                                      # mass of the tokens ranked above
        drop = before >= top_p                                                 # never drops the first
        x = x.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))
    return torch.softmax(x, dim=-1)


def logprobs_for_drafting(logits: Tensor, temperature: float) -> Tensor:
    # logits: [..., V] -> draft log-probs [..., V]: log_softmax(logits / T), plain log_softmax when T == 0 (greedy)
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    x = as_float(logits)
    return torch.log_softmax(_shifted(x) / temperature if temperature > 0 else x, dim=-1)
