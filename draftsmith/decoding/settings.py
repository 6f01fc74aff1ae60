"""The bounds of generate()'s sampling settings (max_new_tokens, temperature, top_p, top_k, seed), checked without
importing torch: generate() checks them with its other arguments (:mod:`draftsmith.decoding.arguments`), the command
line before anything is loaded (a bad ``--temperature`` is said in a fraction of torch's import time)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from draftsmith import limits
from draftsmith.values import is_finite, is_int, is_real
from draftsmith.errors import short

SEED_RANGE = (-(1 << 63), (1 << 64) - 1)   # what torch.Generator.manual_seed accepts
TINY_TEMPERATURE = 2.0 ** -126               # torch.finfo(torch.float32).tiny, without importing torch here
HUGE_TEMPERATURE = (2 - 2.0 ** -23) * 2.0 ** 127   # torch.finfo(torch.float32).max


def number_problems(max_new_tokens: Any, temperature: Any, top_p: Any, top_k: Any, seed: Any, *, vocab: int,
                    names: Mapping[str, str] | None = None) -> list[str]:
    """The numeric settings' problems, each under its name in ``names`` (else its own); top_k is bounded by
    ``vocab``."""
    out = []
    n = {f: (names or {}).get(f, f) for f in ("max_new_tokens", "temperature", "top_p", "top_k", "seed")}
    if not is_int(max_new_tokens) or not 1 <= max_new_tokens <= limits.NEW_TOKENS:
        out.append(f"{n['max_new_tokens']} is {short(max_new_tokens)}; an integer in 1..{limits.NEW_TOKENS} is "
                   "expected")
    if not is_real(temperature) or not is_finite(temperature) or temperature < 0:
        out.append(f"{n['temperature']} is {short(temperature)}; a finite number >= 0 is expected (0 = greedy)")
    elif 0 < temperature < TINY_TEMPERATURE:   # float32 holds it as 0: the logits would be divided by zero
        out.append(f"{n['temperature']} is {short(temperature)}; a temperature above 0 must be at least "
                   f"{TINY_TEMPERATURE:.3g} (float32's smallest normal number, what sampling divides in; "
                   "0 = greedy)")
    elif float(temperature) > HUGE_TEMPERATURE:   # float32 holds it as inf: every logit / T is 0 (float(): a numpy
        # float16 compared with it warned of an overflow)
        out.append(f"{n['temperature']} is {short(temperature)}; a temperature must be at most "
                   f"{HUGE_TEMPERATURE:.4e} (float32's largest number, what sampling divides in)")
    if not is_real(top_p) or not 0 < top_p <= 1:
        out.append(f"{n['top_p']} is {short(top_p)}; a number in (0, 1] is expected")
    if not is_int(top_k) or not 0 <= top_k <= vocab:
        out.append(f"{n['top_k']} is {short(top_k)}; an integer in 0..{vocab} is expected (0 = no top-k filter)")
    if seed is not None and (not is_int(seed) or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]):
        out.append(f"{n['seed']} is {short(seed)}; None or an integer in -2**63 .. 2**64-1 is expected")
    return out
