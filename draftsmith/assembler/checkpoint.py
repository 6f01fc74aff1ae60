"""Listing and reading a checkpoint folder's tensors, metadata first and data only on request.

Loading is "meta, plan, check, assign" (STYLE.md): `list_tensors` reads names, shapes and dtypes (safetensors
headers via `safe_open`, or a memory-mapped `torch.load` whose storages are not touched), the planner checks them
against the model, and only then does `read_tensors` read the data of the names the plan chose. Pickled
checkpoints are only ever opened with `torch.load(weights_only=True)`: a .bin file is untrusted input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor

__all__ = ["TensorInfo", "list_tensors", "read_tensors", "save_safetensors"]

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PT_BIN = "pytorch_model.bin"
PT_BIN_INDEX = "pytorch_model.bin.index.json"
# Pickles that sit beside weights in trainer output folders and hold no tensors.
_NOT_WEIGHTS = frozenset({"training_args.bin"})

# safetensors header dtype strings -> torch dtypes (the optional ones depend on the torch build).
_ST_DTYPES: dict[str, torch.dtype] = {
    "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "I32": torch.int32,
    "I64": torch.int64, "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
    "C64": torch.complex64,
}
for _key, _attr in {"U16": "uint16", "U32": "uint32", "U64": "uint64", "F8_E4M3": "float8_e4m3fn",
                    "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
                    "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2"}.items():
    if hasattr(torch, _attr):
        _ST_DTYPES[_key] = getattr(torch, _attr)


@dataclass(frozen=True)
class TensorInfo:
    """One checkpoint tensor as its file describes it; holds no data."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    file: Path


def _safetensors_infos(file: Path, only: Iterable[str] | None = None) -> dict[str, TensorInfo]:
    out = {}
    with safe_open(str(file), framework="pt") as f:
        keys = set(f.keys())
        wanted = sorted(keys) if only is None else list(only)
        absent = [n for n in wanted if n not in keys]
        if absent:
            raise ValueError(f"{file}: the index lists tensors the file does not hold: {', '.join(absent[:5])}")
        for name in wanted:
            view = f.get_slice(name)  # a lazy handle: header data only
            code = view.get_dtype()
            if code not in _ST_DTYPES:
                raise ValueError(f"{file}: tensor {name!r} has dtype {code}, which this torch cannot represent")
            out[name] = TensorInfo(name, tuple(view.get_shape()), _ST_DTYPES[code], file)
    return out


def _torch_load(file: Path) -> Mapping[str, Tensor]:
    """Unpickle a .bin with the restricted (weights-only) unpickler, memory-mapped so no data is read yet."""
    try:
        obj = torch.load(file, weights_only=True, mmap=True, map_location="cpu")
    except Exception as exc:  # UnpicklingError for disallowed globals, RuntimeError for a non-zip legacy file
        raise ValueError(f"{file}: cannot be read as a plain tensor checkpoint with torch.load(weights_only=True, "
                         f"mmap=True): {exc}") from exc
    if not isinstance(obj, Mapping) or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items()):
        raise ValueError(f"{file}: expected a flat mapping of names to tensors, got {type(obj).__name__}")
    return obj


def _bin_infos(file: Path, only: Iterable[str] | None = None) -> dict[str, TensorInfo]:
    state = _torch_load(file)
    wanted = sorted(state) if only is None else list(only)
    absent = [n for n in wanted if n not in state]
    if absent:
        raise ValueError(f"{file}: the index lists tensors the file does not hold: {', '.join(absent[:5])}")
    return {n: TensorInfo(n, tuple(state[n].shape), state[n].dtype, file) for n in wanted}


def _from_index(folder: Path, index: Path, reader) -> dict[str, TensorInfo]:
    weight_map = json.loads(index.read_text()).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index}: no 'weight_map' mapping tensor names to shard files")
    by_file: dict[str, list[str]] = {}
    for name, shard in weight_map.items():
        by_file.setdefault(shard, []).append(name)
    missing = [s for s in by_file if not (folder / s).is_file()]
    if missing:
        raise FileNotFoundError(f"{index} names shard files that are not in {folder}: {', '.join(sorted(missing))}")
    out: dict[str, TensorInfo] = {}
    for shard, names in sorted(by_file.items()):
        out.update(reader(folder / shard, names))
    return out


def _from_files(files: list[Path], reader) -> dict[str, TensorInfo]:
    out: dict[str, TensorInfo] = {}
    for file in files:
        for name, info in reader(file).items():
            if name in out:
                raise ValueError(f"tensor {name!r} is in both {out[name].file.name} and {file.name}")
            out[name] = info
    return out


def list_tensors(folder: str | Path) -> dict[str, TensorInfo]:
    """Names, shapes and dtypes of every tensor in a checkpoint folder, without reading tensor data.

    Looks, in order, for model.safetensors, model.safetensors.index.json, any *.safetensors, then
    pytorch_model.bin, pytorch_model.bin.index.json, any *.bin; the first kind found is the checkpoint.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"checkpoint folder {folder} does not exist")
    if (folder / SAFETENSORS).is_file():
        return _safetensors_infos(folder / SAFETENSORS)
    if (folder / SAFETENSORS_INDEX).is_file():
        return _from_index(folder, folder / SAFETENSORS_INDEX, _safetensors_infos)
    if files := sorted(folder.glob("*.safetensors")):
        return _from_files(files, _safetensors_infos)
    if (folder / PT_BIN).is_file():
        return _bin_infos(folder / PT_BIN)
    if (folder / PT_BIN_INDEX).is_file():
        return _from_index(folder, folder / PT_BIN_INDEX, _bin_infos)
    if files := sorted(f for f in folder.glob("*.bin") if f.name not in _NOT_WEIGHTS):
        return _from_files(files, _bin_infos)
    raise FileNotFoundError(
        f"no weights in {folder}: looked for {SAFETENSORS}, {SAFETENSORS_INDEX}, *.safetensors, {PT_BIN}, "
        f"{PT_BIN_INDEX} and *.bin")


def read_tensors(infos: Mapping[str, TensorInfo], names: Iterable[str]) -> dict[str, Tensor]:
    """Read the data of the named tensors (checkpoint names), opening each file once."""
    names = list(names)
    unknown = [n for n in names if n not in infos]
    if unknown:
        raise KeyError(f"not in the checkpoint listing: {', '.join(unknown[:10])}")
    by_file: dict[Path, list[str]] = {}
    for name in names:
        by_file.setdefault(infos[name].file, []).append(name)
    out: dict[str, Tensor] = {}
    for file, wanted in by_file.items():
        if file.suffix == ".safetensors":
            with safe_open(str(file), framework="pt", device="cpu") as f:
                out.update((n, f.get_tensor(n)) for n in wanted)
        else:
            state = _torch_load(file)
            out.update((n, state[n]) for n in wanted)
    return {n: out[n] for n in names}


def save_safetensors(tensors: Mapping[str, Tensor], folder: str | Path, filename: str = SAFETENSORS) -> Path:
    """Write tensors to folder/filename (creating the folder); views and shared storages are copied out first."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    seen: set[int] = set()
    flat = {}
    for name, t in tensors.items():
        t = t.detach().to("cpu").contiguous()
        storage = t.untyped_storage()
        # safetensors refuses tensors that share memory; a view (smaller than its storage) is copied out.
        if storage.data_ptr() in seen or storage.nbytes() != t.numel() * t.element_size():
            t = t.clone()
        if t.numel():
            seen.add(t.untyped_storage().data_ptr())
        flat[name] = t
    path = folder / filename
    save_file(flat, str(path), metadata={"format": "pt"})
    return path
