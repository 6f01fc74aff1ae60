"""Target and draft distributions from logits: temperature, top-k, top-p; the greedy token."""

from __future__ import annotations

import torch
from torch import Tensor


def as_float(x: Tensor) -> Tensor:
    # probabilities and logits are computed in float32 (float64 kept): half precision is upcast
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


CHUNK = 256  # the first stage of greedy_token and chunked_topk: each run of CHUNK logits on its own


def greedy_token(logits: Tensor) -> Tensor:
    # logits [..., V] -> [...] logits.argmax(-1) (the first maximum) in two stages: the maximum of each chunk of
    # CHUNK logits (the first in its chunk), then the first chunk holding the largest. An argmax over a whole
    # vocabulary row is one thread block per row (inductor does not split an argmax; nor does ATen's reduction at
    # batch 1): 30-37 us of an 8B step on an H200 for 128256 logits, ~2.5% of a 1B step. Chunks spread it over
    # hundreds of blocks. The padding (-inf) never wins: a row of -inf gives 0, as argmax does.
    V = logits.shape[-1]
    x = torch.nn.functional.pad(logits, (0, -V % CHUNK), value=float("-inf")) if V % CHUNK else logits
    best, at = x.unflatten(-1, (-1, CHUNK)).max(-1)                          # [..., C] each chunk's max, where
    c = best.argmax(-1, keepdim=True)                                         # [..., 1] the first chunk with it
    return (c * CHUNK + at.gather(-1, c)).squeeze(-1)


def chunked_topk(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    # x [..., V] -> values, indices [..., k]: torch.topk(x, k) (sorted, the same values; among equal values the
    # order is unspecified in both) in two stages: the top k of each chunk of CHUNK, then the top k of those. For a
    # few rows of a vocabulary torch.topk runs its multi-block radix select, ~25 kernels a call (digit counts,
    # cumulative sums, ~10 fills): ~100 of a tree step's kernels at the 8B shape on an H200 (0.2 ms of 6.8). Both
    # stages here are single-block selects over short rows. k <= CHUNK. A last, partial chunk gives its own best
    # (no padding: a pad would tie with a real -inf and could be picked). Under two chunks it is torch.topk itself:
    # inductor (torch 2.13, CPU) compiled one whole chunk and a tail with a symbolic width (dynamic=True, or a
    # second draft vocabulary in a process) into the tail's top k alone, or 'selected index k out of range' (258)
    V = x.shape[-1]
    if V < 2 * CHUNK:
        return x.topk(k, dim=-1)
    whole = V - V % CHUNK
    values, at = x[..., :whole].unflatten(-1, (-1, CHUNK)).topk(k, dim=-1)     # [..., C, k] each chunk's best
    at = (at + torch.arange(0, whole, CHUNK, device=x.device).unsqueeze(-1)).flatten(-2)
    values = values.flatten(-2)                                                # [..., C * k]
    if whole < V:
        tail, tail_at = x[..., whole:].topk(min(k, V - whole), dim=-1)
        values, at = torch.cat([values, tail], -1), torch.cat([at, tail_at + whole], -1)
    values, pick = values.topk(k, dim=-1)                                      # [..., k] the best of them
    return values, at.gather(-1, pick)


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
    # tokens are ranked by their logits as given: not by logits / T nor the probabilities, which tie where T is huge
    # (every probability 1/V in float32), nor by logits - max, whose rounding ties logits an ulp apart. Equal logits
    # (frequent in bf16) rank the lowest id first, on every device (transformers' top_p cuts an unstable sort: which
    # of the tied it keeps is the sort kernel's)
    scores = as_float(logits)                                                  # [..., V]
    x = _shifted(scores) / temperature
    if 0 < top_k < x.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]               # [..., 1]
        x = x.masked_fill(scores < kth, float("-inf"))
    if top_p < 1:
        order = torch.sort(scores, dim=-1, descending=True, stable=True).indices   # [..., V]; masked ones last
        probs = torch.softmax(x, dim=-1).gather(-1, order)
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
