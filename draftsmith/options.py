"""Device, dtype and thread options, checked before anything is built (the CLI and ``assemble`` use these)."""
from __future__ import annotations

import torch

from draftsmith.errors import OptionError, short

# Weights are cast to one of these; integer and float8 kinds are quantization, which is a spec's ``quant``.
FLOAT_DTYPES = {"float32": torch.float32, "float": torch.float32, "float64": torch.float64,
                "double": torch.float64, "float16": torch.float16, "half": torch.float16,
                "bfloat16": torch.bfloat16}
NAMES = "float32, bfloat16, float16 or float64"


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """A floating-point torch dtype from its name (or itself); OptionError otherwise (int8 is not a load dtype)."""
    if isinstance(dtype, torch.dtype):
        if dtype in FLOAT_DTYPES.values():
            return dtype
    elif isinstance(dtype, str) and dtype.removeprefix("torch.") in FLOAT_DTYPES:
        return FLOAT_DTYPES[dtype.removeprefix("torch.")]
    raise OptionError(f"dtype {short(dtype)} is not a weight dtype; use {NAMES} (quantized drafts are a spec's "
                      "quant section)")


def check_device(device: str | torch.device) -> str:
    """``device`` as a string if this machine has it; OptionError naming what is missing otherwise."""
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


def check_threads(threads: int) -> int:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise OptionError(f"threads is {short(threads)}; an integer >= 1 is expected")
    return threads
