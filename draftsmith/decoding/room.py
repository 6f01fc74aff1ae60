"""Whether a call's KV pools fit in the memory its device has free, said before they are allocated: a pool is sized
up front for the whole call (static_pool), so a long ``max_new_tokens`` over a target claiming a huge context asked
torch for tens of GB at once (an internal error, or the machine swapping) where one line can say what it needs."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from draftsmith.errors import ArgumentError

GB = 1 << 30


def pool_bytes(layouts: Sequence[Mapping[str, tuple[int, ...]]], rows: int, capacity: int, dtype: torch.dtype) -> int:
    """Bytes of a StaticKVPool over ``layouts``: every layer's tensors for rows * capacity slots and the trash slot."""
    per_slot = sum(math.prod(shape) for layout in layouts for shape in layout.values())
    return per_slot * (rows * capacity + 1) * dtype.itemsize


def free_bytes(device: torch.device, meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Memory ``device`` has free for new tensors (the CPU: Linux's MemAvailable; CUDA: the driver's free memory and
    the caching allocator's unused blocks), None where that is not known (another system, another device kind)."""
    if device.type == "cuda":   # and what torch's caching allocator holds unused, which it hands out again
        unused = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return torch.cuda.mem_get_info(device)[0] + unused
    if device.type != "cpu":
        return None
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024   # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_room(need: int, device: torch.device, rows: int, capacity: int, what: str = "generate()",
               free: int | None = None) -> None:
    """An ArgumentError when KV pools of ``need`` bytes (``rows`` rows of ``capacity`` positions, target and draft)
    do not fit in what ``device`` has free; nothing where that is unknown."""
    free = free_bytes(device) if free is None else free
    if free is not None and need > free:
        raise ArgumentError(what, [
            f"the KV caches for {rows} prompt(s) of up to {capacity} positions each (the longest prompt + "
            f"max_new_tokens + the draft's scratch) need {_size(need)}, and device {device} has {_size(free)} free: "
            "ask for fewer new tokens or fewer prompts at once"])


def _size(n: int) -> str:
    """Bytes in GB (two decimals), or MB below a tenth of one (a tiny need is not "0.00 GB")."""
    return f"{n / GB:.2f} GB" if n >= GB / 10 else f"{n / (1 << 20):.2f} MB"
