"""Sliding-window attention as a wrapper around any attention backend.

transformers' rule: query at position p sees key at position k iff k <= p and p - k < window. The wrapper needs
no positions: in every mask draftsmith builds (causal prefill/decode, padded batches, verification trees) the
keys a query sees are exactly one key per position 0..p, in read order (the committed prefix in position order,
then the query's ancestors, parents before children). So a visible key's distance to the query is the number of
visible keys after it, and the window keeps those with ``seen_total - seen_up_to_key < window``.
"""
from __future__ import annotations

from typing import Callable

import torch

from draftsmith.components.backends import causal_mask

Backend = Callable[..., torch.Tensor]


def window_mask(mask: torch.Tensor, window: int) -> torch.Tensor:
    # mask: [..., T, S] bool (True = attend) -> the same mask with keys window or more positions back removed
    seen = mask.cumsum(-1)                                   # visible keys up to and including each key
    return mask & (seen[..., -1:] - seen < window)


def windowed(backend: Backend, window: int) -> Backend:
    """``backend`` restricted to the last ``window`` positions (mask=None is bottom-right causal)."""
    last: list = [None, None]                                # (what the last call's mask came from, its window)

    def attend(q, k, v, mask, scale, **more):               # more: sinks=, where the backend takes them
        T, S = q.shape[2], k.shape[2]
        if S <= window and mask is None:
            return backend(q, k, v, None, scale, **more)     # no query can reach past the window: plain causal
        key = mask if mask is not None else (T, S, str(q.device))
        fresh = last[0] is not key if torch.is_tensor(key) else last[0] != key
        if fresh:  # every layer of one forward passes the same mask object: the window is built once
            base = mask if mask is not None else causal_mask(T, S, q.device)[None, None]
            last[0], last[1] = key, window_mask(base, window)
        return backend(q, k, v, last[1], scale, **more)

    attend.window = window
    attend.inner = backend
    attend.takes_sinks = getattr(backend, "takes_sinks", False)
    return attend


def stated_window(cfg) -> int | None:
    """The window a config (a mapping as written) asks for, or None: ``sliding_window`` when it is a positive number
    and ``use_sliding_window`` is not false (Qwen2-style configs switch the window off with that flag and often
    carry a stale size; Mistral-style ones have no flag)."""
    window = cfg.get("sliding_window")
    on = cfg.get("use_sliding_window", True) is not False
    return window if on and isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
