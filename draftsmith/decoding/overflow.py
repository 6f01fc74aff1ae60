"""Target logits that overflow (NaN or +inf: an activation past float16's range, a division by zero) end a call:
from there greedy decoding takes a NaN's argmax and a draw the last id, text that only looks like output. Only the
logits that decide an emitted token count (a rejected draft node's, or a finished row's, decide none), and each
step's flags ride its one host read with its tokens (engine's HostCopy): no host read of their own."""
from __future__ import annotations

import torch

from draftsmith.errors import DecodingError


def overflowed(logits: torch.Tensor) -> torch.Tensor:
    # logits [..., V] -> [...] long: 1 where a row of logits holds NaN or +inf (-inf is a token the model masks)
    return (~(logits < float("inf")).all(-1)).long()


def path_overflowed(logits: torch.Tensor, path: torch.Tensor) -> torch.Tensor:
    # logits [B, n, V], path [B, D+1] (a verdict's node indices, -1 past the accepted) -> [B, D+1] long: 1 where the
    # path's node j overflowed, whose logits decided the j-th token the step emits (rejected nodes decide none)
    return overflowed(logits).gather(1, path.clamp(min=0)) * (path >= 0)


def first_overflow(flags: list[int], kept: int) -> int | None:
    """The index of the first of a row's ``kept`` emitted tokens whose logits overflowed, or None."""
    return next((j for j, bad in enumerate(flags[:kept]) if bad), None)


def refuse_overflow(bad: list[tuple[int, int]], dtype: torch.dtype, what: str) -> None:
    """A :class:`DecodingError` naming each (prompt, new tokens before it) in ``bad``, if any."""
    if not bad:
        return
    name = str(dtype).removeprefix("torch.")
    why = ("float16's range (up to 65504) is too small for this model's activations: decode in bfloat16 (the same "
           "memory) or float32 (dtype=, --dtype)" if dtype == torch.float16 else
           f"the weights loaded finite, so a forward overflowed {name} or divided by zero: try float32")
    where = ", ".join(f"prompt {i} after {n} new tokens" for i, n in bad[:8]) + (" and more" if len(bad) > 8 else "")
    raise DecodingError(f"{what}: the target's logits hold NaN or +inf ({where}; dtype {name}): {why}")
