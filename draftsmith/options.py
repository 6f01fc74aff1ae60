"""Device, dtype and thread options, checked before anything is built (the CLI and ``assemble`` use these); the
paths a command reads and writes are :mod:`draftsmith.paths`."""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from draftsmith import limits
from draftsmith.errors import OptionError, short

if TYPE_CHECKING:
    import torch

# Weights are cast to one of these (a name -> torch's); integer and float8 kinds are quantization, which is a
# spec's ``quant``. Names, so that the command line checks --dtype without importing torch.
FLOAT_DTYPES = {"float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
                "float16": "float16", "half": "float16", "bfloat16": "bfloat16"}
NAMES = "float32, bfloat16, float16 or float64"
ID_DIGITS = 18   # the most digits --token-ids reads in one id (an int64 holds every id of 18)


def flag(name: str, on: bool) -> str:
    """A boolean option as the command line gives it: ``--name`` or ``--no-name``."""
    return f"--{name}" if on else f"--no-{name}"


def collect(problems: list[str], check, *args):
    """``check(*args)``, or None with its OptionError's text appended to ``problems``: a command checks every
    option and says all the bad ones at once."""
    try:
        return check(*args)
    except OptionError as e:
        problems.append(str(e))
        return None


def float_name(dtype: Any) -> str:
    """The torch name of a floating-point weight dtype given by name (or as a torch dtype), checked without importing
    torch; OptionError otherwise (int8 is not a load dtype)."""
    torch = sys.modules.get("torch")   # a torch dtype exists only once torch is imported
    name = dtype if isinstance(dtype, str) else str(dtype) if torch and isinstance(dtype, torch.dtype) else None
    if name is not None and (key := name.removeprefix("torch.")) in FLOAT_DTYPES:
        return FLOAT_DTYPES[key]
    raise OptionError(f"dtype {short(dtype)} is not a weight dtype; use {NAMES} (quantized drafts are a spec's "
                      "quant section)")


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """A floating-point torch dtype from its name (or itself); OptionError otherwise (:func:`float_name`)."""
    import torch

    return getattr(torch, float_name(dtype))


def check_device(device: str | torch.device) -> str:
    """``device`` as a string if this machine has it; OptionError naming what is missing otherwise. ``"cpu"`` is
    taken without importing torch (the command line's default)."""
    if device == "cpu":
        return device
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise OptionError(f"device {short(device)} is not a torch device; use cpu, cuda or cuda:N") from None
    if dev.type == "cpu":
        return str(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = "this torch is built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise OptionError(f"device {short(str(device))}: {why}; use the cpu device")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise OptionError(f"device {short(str(device))}: only {torch.cuda.device_count()} CUDA device(s) "
                              f"(cuda:0..cuda:{torch.cuda.device_count() - 1})")
        return str(device)
    if dev.type == "mps" and torch.backends.mps.is_available():
        return str(device)
    raise OptionError(f"device {short(str(device))} is not available here; use cpu"
                      + (" or cuda" if torch.cuda.is_available() else ""))


def check_threads(threads: int, auto: bool = False) -> int:
    """``threads`` if it is an integer in 1..os.cpu_count(): more threads than the machine has CPUs only slow torch
    down (10000 took 113 s where 1 takes a second), and torch refuses a count past a C int with an internal error.
    ``auto``: the option also takes 'auto' (the message says so)."""
    cpus = os.cpu_count() or 1
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= cpus:
        raise OptionError(f"--threads is {short(threads)}: allowed an integer in 1..{cpus}, this machine's CPU count "
                          "(os.cpu_count())" + (", or auto (the fastest count, measured)" if auto else ""))
    return threads


def parse_threads(text: str) -> int | None:
    """--threads of generate and bench: None for 'auto' (draftsmith.threads measures the count), else the integer
    :func:`check_threads` allows."""
    if text == "auto":
        return None
    try:
        threads = int(text)
    except (TypeError, ValueError):
        threads = text   # refused below, as it was given
    return check_threads(threads, auto=True)


def parse_token_ids(text: str) -> list[int]:
    """--token-ids 1,2,3 (commas or spaces); an empty item (1,,2 or a trailing comma) is refused, not skipped. The
    ids themselves are checked by generate() against the vocabulary."""
    items = text.split(",")
    parts = [p for item in items for p in item.split()]
    empty = "" if len(items) == 1 or all(i.strip() for i in items) else "an item is empty; "
    if empty or not parts or not all(p.isascii() and p.isdigit() for p in parts):
        raise OptionError(f"--token-ids {short(text)}: {empty}token ids are integers >= 0 separated by commas, "
                          "e.g. 1,2,3")
    if long := next((p for p in parts if len(p) > ID_DIGITS), None):   # read as no int64, past any vocabulary
        raise OptionError(f"--token-ids {short(long)}: too large to be a token id (a vocabulary holds at most "
                          f"{limits.VOCAB} tokens); give the target's ids, e.g. 1,2,3")
    return [int(p) for p in parts]


