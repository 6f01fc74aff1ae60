"""One weight file's tensor listing, metadata only: a safetensors file's header (dtypes, shapes; what is wrong
with one safetensors refuses, in the file's own terms) and a .bin's names and shapes through a memory-mapped
``torch.load(weights_only=True)`` whose storages are not touched. The folder around them (index, shards, links)
is :mod:`draftsmith.assembler.checkpoint`'s."""
from __future__ import annotations

import json
import pickle
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor

from draftsmith import limits
from draftsmith.errors import CheckpointError, short, short_list, short_text

READ_ERRORS = (SafetensorError, OSError, ValueError, RuntimeError, TypeError, OverflowError)

# safetensors header dtype strings -> torch dtypes (the optional ones depend on the torch build).
_ST_DTYPES: dict[str, torch.dtype] = {
    "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "I32": torch.int32,
    "I64": torch.int64, "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
    "C64": torch.complex64,
}
_ST_OPTIONAL = {"U16": "uint16", "U32": "uint32", "U64": "uint64", "F8_E4M3": "float8_e4m3fn",
                "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
                "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2"}
_ST_KNOWN = frozenset({*_ST_DTYPES, *_ST_OPTIONAL})   # every dtype string safetensors writes
for _key, _attr in _ST_OPTIONAL.items():
    if hasattr(torch, _attr):
        _ST_DTYPES[_key] = getattr(torch, _attr)
# packed e2m1 pairs (NVFP4): torch has no kernel or cast for it, and e2m1 has no NaN or inf
FLOAT4 = getattr(torch, "float4_e2m1fn_x2", None)


@dataclass(frozen=True)
class TensorInfo:
    """One checkpoint tensor as its file describes it; holds no data."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    file: Path


def check_names(path: Path, names: Iterable[str], count: int) -> None:
    """Refuse a listing of more than ``limits.TENSORS`` names or a name past ``limits.TENSOR_NAME_CHARS``, before
    any per-tensor work: a real checkpoint has at most ~10^5 tensors, named in under ~300 characters."""
    if count > limits.TENSORS:
        raise CheckpointError(path, f"lists {count} tensors; a checkpoint here holds at most {limits.TENSORS} "
                                    "(draftsmith/limits.py)")
    if long := next((n for n in names if len(n) > limits.TENSOR_NAME_CHARS), None):
        raise CheckpointError(path, f"tensor name {short(long)} is {len(long)} characters long; a tensor name is at "
                                    f"most {limits.TENSOR_NAME_CHARS} (draftsmith/limits.py)")


def safetensors_infos(file: Path, only: Iterable[str] | None = None) -> dict[str, TensorInfo]:
    out = {}
    try:
        with safe_open(str(file), framework="pt") as f:
            keys = set(f.keys())
            check_names(file, keys, len(keys))
            for name in wanted_names(file, keys, only):
                view = f.get_slice(name)  # a lazy handle: header data only
                code = view.get_dtype()
                if code not in _ST_DTYPES:
                    raise CheckpointError(file, f"tensor {short(name)} has dtype {short(code)}, which this torch "
                                                "cannot represent")
                out[name] = TensorInfo(name, tuple(view.get_shape()), _ST_DTYPES[code], file)
    except CheckpointError:
        raise
    except READ_ERRORS as exc:  # truncated, empty, bad header, unknown dtype; unopenable (safetensors: "No such file")
        why = unopenable(file) or header_fault(file) or short_text(exc, 300)   # safetensors' words name no sizes
        raise CheckpointError(file, f"not a readable safetensors file: {why}") from None
    return out


def unopenable(file: Path) -> str | None:
    """Why ``file`` cannot be opened for reading ("Permission denied"), or None: safetensors says every failure to
    open as FileNotFoundError, so an unreadable file was said as missing."""
    try:
        with open(file, "rb"):
            return None
    except OSError as e:
        return e.strerror or str(e)


SAFETENSORS_HEADER = 100_000_000   # the longest header safetensors reads (its MAX_HEADER_SIZE)
LFS_POINTER = b"version https://git-lfs"   # how a Git LFS pointer file begins


def header_fault(file: Path) -> str | None:
    """What is wrong with a safetensors file safetensors refused, in the file's terms (a Git LFS pointer in its
    place, a header length past its end, its size against what its header describes, the tensor whose dtype or byte
    range does not fit), or None where the header itself cannot be read (safetensors' own words then stand)."""
    try:
        size = file.stat().st_size
        with file.open("rb") as f:
            first = f.read(len(LFS_POINTER))
            if first == LFS_POINTER:   # a clone without git-lfs: the pointer file stands where the weights belong
                return (f"it is a Git LFS pointer file ({size} bytes), not the weights: fetch them (git lfs pull in "
                        "the clone, or download the file itself)")
            n = int.from_bytes(first[:8], "little")
            if 8 <= size < 8 + n:   # the length its first 8 bytes give runs past the file
                return (f"the file is {size} bytes and its first 8 bytes give a header of {n}: it is cut short inside "
                        "its header (an interrupted download? fetch it again)" if n <= SAFETENSORS_HEADER else
                        f"its first 8 bytes give a header of {n} bytes, which no safetensors file has (at most "
                        f"{SAFETENSORS_HEADER}): it is damaged, or no safetensors file")
            if size < 8 or n > limits.JSON_BYTES:
                return None
            f.seek(8)
            header = json.loads(f.read(n))
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        for name, t in tensors.items():
            begin, end = t["data_offsets"]
            if t["dtype"] not in _ST_KNOWN:
                return f"tensor {short(name)} has dtype {short(t['dtype'])}, which safetensors does not know"
            if not isinstance(t["shape"], list) or any(type(d) is not int or d < 0 for d in t["shape"]):
                # a string or a list as a size would be repeated, not multiplied (a header edit: a huge message)
                return f"tensor {short(name)} has shape {short(t['shape'])}, which is no list of sizes (integers >= 0)"
            items = 1
            for d in t["shape"]:
                items *= d
            dtype = _ST_DTYPES.get(t["dtype"], FLOAT4)   # packed float4 (or one this torch lacks): not sized here
            if dtype != FLOAT4 and end - begin != (need := items * dtype.itemsize):
                return (f"tensor {short(name)} ({t['dtype']} {short(t['shape'])}) needs {need} bytes, its header "
                        f"gives it {end - begin}")
        data = max((t["data_offsets"][1] for t in tensors.values()), default=0)
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
    if size < 8 + n + data:
        return (f"the file is {size} bytes and its header describes {8 + n + data}: it is cut short (an "
                f"interrupted download? fetch it again)")
    if size > 8 + n + data:
        return f"the file is {size} bytes, {size - 8 - n - data} past the data its header describes"
    return None


def torch_load(file: Path) -> Mapping[str, Tensor]:
    """Unpickle a .bin with the restricted (weights-only) unpickler, memory-mapped so no data is read yet."""
    if not zipfile.is_zipfile(file):   # torch's own text advises a save option; the file's format is the news
        with file.open("rb") as f:
            if f.read(4) == b"PK\x03\x04":   # a zip's first entry, but no directory at its end: the end is missing
                raise CheckpointError(file, "is a zip-format torch checkpoint cut short (its end, the zip's directory, "
                                            "is missing: an interrupted download? fetch it again)")
        raise CheckpointError(file, "is not a zip-format torch checkpoint (a legacy torch.save before torch 1.6, or "
                                    "a plain pickle): draftsmith reads .bin files only with torch.load(weights_only="
                                    "True, mmap=True), which needs that format; save the tensors with a current "
                                    "torch.save, or as safetensors")
    try:
        obj = torch.load(file, weights_only=True, mmap=True, map_location="cpu")
    except pickle.UnpicklingError as exc:   # torch's text advises weights_only=False: draftsmith never does that
        found = next((line for line in str(exc).splitlines() if "GLOBAL" in line), "")
        found = found.split(" was not an allowed global")[0].strip()   # torch's allowlisting advice cut off
        raise CheckpointError(file, "holds pickled Python objects other than tensors, which draftsmith never "
                                    f"loads{': ' + short_text(found, 200) if found else ''}; save the tensors alone, "
                                    "or as safetensors") from None
    except Exception as exc:  # RuntimeError for a non-zip legacy file
        raise CheckpointError(file, f"cannot be read as a plain tensor checkpoint with torch.load(weights_only=True, "
                                    f"mmap=True): {short_text(exc, 300)}") from None
    if not isinstance(obj, Mapping):
        raise CheckpointError(file, f"expected a flat mapping of names to tensors, got {type(obj).__name__}")
    if bad := next(((k, v) for k, v in obj.items() if not (isinstance(k, str) and isinstance(v, Tensor))), None):
        key, value = bad   # e.g. a trainer's checkpoint: {"state_dict": {...}, "step": 3}
        raise CheckpointError(file, f"expected a flat mapping of names to tensors; its entry {short(key)} holds "
                                    f"{'a nested mapping' if isinstance(value, Mapping) else type(value).__name__}"
                                    f" (a trainer's checkpoint? save the model's state dict alone)")
    return obj


def wanted_names(file: Path, held, only: Iterable[str] | None) -> list[str]:
    """The names to read from a file holding ``held``: ``only`` (the index's, each checked to be there), else all."""
    wanted = sorted(held) if only is None else list(only)
    absent = [n for n in wanted if n not in held]
    if absent:
        held_not = short_list(absent, quote=False)
        raise CheckpointError(file, f"the index lists tensors the file does not hold: {held_not}")
    return wanted


def bin_infos(file: Path, only: Iterable[str] | None = None) -> dict[str, TensorInfo]:
    state = torch_load(file)
    check_names(file, state, len(state))
    return {n: TensorInfo(n, tuple(state[n].shape), state[n].dtype, file) for n in wanted_names(file, state, only)}
