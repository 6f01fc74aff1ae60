"""Listing and reading a checkpoint folder's tensors, metadata first and data only on request.

Loading is "meta, plan, check, assign" (STYLE.md): `list_tensors` reads names, shapes and dtypes (safetensors
headers via `safe_open`, or a memory-mapped `torch.load` whose storages are not touched), the planner checks them
against the model, and only then does `read_tensors` read the data of the names the plan chose. Pickled
checkpoints are only ever opened with `torch.load(weights_only=True)`: a .bin file is untrusted input.

Every file read is untrusted too: it must be a regular file (a FIFO would block forever), inside the checkpoint
folder once symlinks are resolved (index shards and links that leave it are refused; the Hugging Face cache's
`snapshots/<rev>/x -> ../../blobs/<hash>` links are inside by construction; `DRAFTSMITH_ALLOW_OUTSIDE_LINKS=1`
allows any), and each parse failure is a CheckpointError naming the file. `read_tensors(..., finite=True)`
reports NaN and inf values at load.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import Tensor

from draftsmith import limits
from draftsmith.errors import CheckpointError, CheckpointNotFound, short, short_list, short_text
from draftsmith.options import utf8_problem

__all__ = ["TensorInfo", "list_tensors", "read_json", "read_tensors", "regular_file", "save_safetensors"]
ALLOW_OUTSIDE = "DRAFTSMITH_ALLOW_OUTSIDE_LINKS"
_READ_ERRORS = (SafetensorError, OSError, ValueError, RuntimeError, TypeError, OverflowError)

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
_ST_OPTIONAL = {"U16": "uint16", "U32": "uint32", "U64": "uint64", "F8_E4M3": "float8_e4m3fn",
                "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
                "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2"}
_ST_KNOWN = frozenset({*_ST_DTYPES, *_ST_OPTIONAL})   # every dtype string safetensors writes
for _key, _attr in _ST_OPTIONAL.items():
    if hasattr(torch, _attr):
        _ST_DTYPES[_key] = getattr(torch, _attr)
# packed e2m1 pairs (NVFP4): torch has no kernel or cast for it, and e2m1 has no NaN or inf
FLOAT4 = getattr(torch, "float4_e2m1fn_x2", None)


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (links resolved) stays in ``folder``; a Hugging Face cache snapshot's blobs count as inside."""
    real, root = path.resolve(), folder.resolve()
    if real.is_relative_to(root) or os.environ.get(ALLOW_OUTSIDE) == "1":
        return True
    # huggingface_hub: <repo>/snapshots/<revision>/<file> -> <repo>/blobs/<sha>
    return root.parent.name == "snapshots" and real.is_relative_to(root.parent.parent / "blobs")


def checkpoint_folder(folder: str | Path, label: str | None = None) -> Path:
    """``folder`` as a Path if it is a folder; else a CheckpointNotFound that says why, ``label`` naming it
    (default 'checkpoint folder PATH'): a name too long for the file system, a NUL, a loop of links or a folder
    that may not be read is said so, not an internal error."""
    folder = Path(folder)
    try:
        what = None if stat.S_ISDIR(folder.stat().st_mode) else "is not a folder"
    except (FileNotFoundError, NotADirectoryError):
        what = "does not exist"
    except (OSError, ValueError) as e:   # ENAMETOOLONG, ELOOP, EACCES; ValueError: a NUL in the name
        what = f"cannot be read: {getattr(e, 'strerror', None) or e}"
    what = what or utf8_problem(folder)
    if what is not None:
        raise CheckpointNotFound(f"{label or f'checkpoint folder {short_text(folder, 300)}'} {what}")
    return folder


def not_regular(mode: int) -> str:
    """What a file that is not a regular file is, for a message ('a FIFO', 'a folder', ...)."""
    return "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "not a regular file"


def regular_file(path: Path, folder: Path | None = None) -> Path:
    """``path`` if it is a regular file (inside ``folder`` when given); else a draftsmith error naming it."""
    try:
        mode = path.stat().st_mode
    except OSError:
        raise CheckpointNotFound(f"{short_text(path, 300)} does not exist (or is a broken link)") from None
    if not stat.S_ISREG(mode):
        raise CheckpointNotFound(f"{short_text(path, 300)} is {not_regular(mode)}; checkpoint files must be regular "
                                 "files")
    if why := utf8_problem(path):
        raise CheckpointError(path, why)
    if folder is not None and not _inside(path, folder):
        raise CheckpointError(path, f"resolves to {short_text(path.resolve(), 300)}, outside the checkpoint folder "
                                    f"{short_text(folder, 300)}; set {ALLOW_OUTSIDE}=1 to allow links that leave it")
    return path


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {short(key)} appears twice in one object")
        out[key] = value
    return out


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, iteratively (bounded by the parser's own recursion limit anyway)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def read_json(path: Path, folder: Path | None = None, *, what: str = "JSON object") -> dict[str, Any]:
    """A JSON object from a checkpoint file: a regular file of at most ``limits.JSON_BYTES`` of UTF-8, no duplicate
    keys, at most ``limits.JSON_DEPTH`` deep, and an object (a list or a number is refused); CheckpointError else."""
    regular_file(path, folder)
    size = path.stat().st_size
    if size > limits.JSON_BYTES:
        raise CheckpointError(path, f"{size} bytes; a JSON file here is at most {limits.JSON_BYTES} bytes")
    data = path.read_bytes()
    try:
        value = json.loads(data.decode("utf-8-sig"), object_pairs_hook=_unique_keys)
    except UnicodeDecodeError as e:
        raise CheckpointError(path, f"not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start})") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(path, f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except (ValueError, RecursionError) as e:
        raise CheckpointError(path, f"not valid JSON: {short_text(e, 200)}") from None
    if not isinstance(value, dict):
        raise CheckpointError(path, f"the file holds a JSON {type(value).__name__}; a {what} is expected")
    if _depth(value) > limits.JSON_DEPTH:
        raise CheckpointError(path, f"nested deeper than {limits.JSON_DEPTH} levels")
    return value


@dataclass(frozen=True)
class TensorInfo:
    """One checkpoint tensor as its file describes it; holds no data."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    file: Path


def _check_names(path: Path, names: Iterable[str], count: int) -> None:
    """Refuse a listing of more than ``limits.TENSORS`` names or a name past ``limits.TENSOR_NAME_CHARS``, before
    any per-tensor work: a real checkpoint has at most ~10^5 tensors, named in under ~300 characters."""
    if count > limits.TENSORS:
        raise CheckpointError(path, f"lists {count} tensors; a checkpoint here holds at most {limits.TENSORS} "
                                    "(draftsmith/limits.py)")
    if long := next((n for n in names if len(n) > limits.TENSOR_NAME_CHARS), None):
        raise CheckpointError(path, f"tensor name {short(long)} is {len(long)} characters long; a tensor name is at "
                                    f"most {limits.TENSOR_NAME_CHARS} (draftsmith/limits.py)")


def _safetensors_infos(file: Path, only: Iterable[str] | None = None) -> dict[str, TensorInfo]:
    out = {}
    try:
        with safe_open(str(file), framework="pt") as f:
            keys = set(f.keys())
            _check_names(file, keys, len(keys))
            for name in _wanted(file, keys, only):
                view = f.get_slice(name)  # a lazy handle: header data only
                code = view.get_dtype()
                if code not in _ST_DTYPES:
                    raise CheckpointError(file, f"tensor {short(name)} has dtype {short(code)}, which this torch "
                                                "cannot represent")
                out[name] = TensorInfo(name, tuple(view.get_shape()), _ST_DTYPES[code], file)
    except CheckpointError:
        raise
    except _READ_ERRORS as exc:  # truncated, empty, bad header, unknown dtype
        why = header_fault(file) or short_text(exc, 300)   # safetensors' words name neither sizes nor tensors
        raise CheckpointError(file, f"not a readable safetensors file: {why}") from None
    return out


def header_fault(file: Path) -> str | None:
    """What is wrong with a safetensors file safetensors refused, in the file's terms (its size against what its
    header describes, the tensor whose dtype or byte range does not fit), or None where the header itself cannot
    be read (safetensors' own words then stand)."""
    try:
        size = file.stat().st_size
        with file.open("rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or n > min(size - 8, limits.JSON_BYTES):
                return None
            header = json.loads(f.read(n))
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        for name, t in tensors.items():
            begin, end = t["data_offsets"]
            if t["dtype"] not in _ST_KNOWN:
                return f"tensor {short(name)} has dtype {short(t['dtype'])}, which safetensors does not know"
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


def _torch_load(file: Path) -> Mapping[str, Tensor]:
    """Unpickle a .bin with the restricted (weights-only) unpickler, memory-mapped so no data is read yet."""
    if not zipfile.is_zipfile(file):   # torch's own text advises a save option; the file's format is the news
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


def _wanted(file: Path, held, only: Iterable[str] | None) -> list[str]:
    """The names to read from a file holding ``held``: ``only`` (the index's, each checked to be there), else all."""
    wanted = sorted(held) if only is None else list(only)
    absent = [n for n in wanted if n not in held]
    if absent:
        held_not = short_list(absent, quote=False)
        raise CheckpointError(file, f"the index lists tensors the file does not hold: {held_not}")
    return wanted


def _bin_infos(file: Path, only: Iterable[str] | None = None) -> dict[str, TensorInfo]:
    state = _torch_load(file)
    _check_names(file, state, len(state))
    return {n: TensorInfo(n, tuple(state[n].shape), state[n].dtype, file) for n in _wanted(file, state, only)}


def _from_index(folder: Path, index: Path, reader) -> dict[str, TensorInfo]:
    weight_map = read_json(index, folder, what="shard index (an object with a 'weight_map')").get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(index, "no 'weight_map' mapping tensor names to shard files")
    _check_names(index, weight_map, len(weight_map))
    bad = [s for s in weight_map.values() if not isinstance(s, str) or not s or Path(s).is_absolute()]
    if bad:
        raise CheckpointError(index, f"shard entries must be file names in the folder, found {short_list(bad)}")
    by_file: dict[str, list[str]] = {}
    for name, shard in weight_map.items():
        by_file.setdefault(shard, []).append(name)
    # '../x.safetensors': an index's names never reach out of its folder; where a link inside leads is
    # regular_file's to judge (_inside: a Hugging Face cache's blobs, DRAFTSMITH_ALLOW_OUTSIDE_LINKS)
    outside = [s for s in by_file if os.path.normpath(s).split(os.sep)[0] == os.pardir]
    if outside:
        raise CheckpointError(index, f"names shard files outside {short_text(folder, 200)}: {short_list(outside)}")
    missing = [s for s in by_file if not (folder / s).exists()]
    if broken := [s for s in missing if (folder / s).is_symlink()]:   # an interrupted download's link
        raise CheckpointNotFound(f"{short_text(index, 300)} names shard files that are broken links in "
                                 f"{short_text(folder, 300)}: {short_list(sorted(broken), 10, quote=False)}")
    if missing:
        raise CheckpointNotFound(f"{short_text(index, 300)} names shard files that are not in "
                                 f"{short_text(folder, 300)}: {short_list(sorted(missing), 10, quote=False)}")
    out: dict[str, TensorInfo] = {}
    for shard, names in sorted(by_file.items()):
        out.update(reader(regular_file(folder / shard, folder), names))
    return out


def _from_files(files: list[Path], reader) -> dict[str, TensorInfo]:
    out: dict[str, TensorInfo] = {}
    for file in files:
        infos = reader(file)
        _check_names(file.parent, (), len(out) + len(infos))  # the files together, too
        for name, info in infos.items():
            if name in out:
                raise CheckpointError(file.parent, f"tensor {short(name)} is in both {short(out[name].file.name)} and "
                                                   f"{short(file.name)}")
            out[name] = info
    return out


def _present(path: Path) -> bool:
    """Whether a weights file of this name is there; one that is there but is no regular file is refused."""
    return path.exists() and regular_file(path, path.parent) is not None


def list_tensors(folder: str | Path) -> dict[str, TensorInfo]:
    """Names, shapes and dtypes of every tensor in a checkpoint folder, without reading tensor data.

    Looks, in order, for model.safetensors, model.safetensors.index.json, any *.safetensors, then
    pytorch_model.bin, pytorch_model.bin.index.json, any *.bin; the first kind found is the checkpoint.
    """
    folder = checkpoint_folder(folder)
    if _present(folder / SAFETENSORS):
        return _safetensors_infos(folder / SAFETENSORS)
    if _present(folder / SAFETENSORS_INDEX):
        return _from_index(folder, folder / SAFETENSORS_INDEX, _safetensors_infos)
    if files := sorted(folder.glob("*.safetensors")):
        return _from_files([regular_file(f, folder) for f in files], _safetensors_infos)
    if _present(folder / PT_BIN):
        return _bin_infos(folder / PT_BIN)
    if _present(folder / PT_BIN_INDEX):
        return _from_index(folder, folder / PT_BIN_INDEX, _bin_infos)
    if files := sorted(f for f in folder.glob("*.bin") if f.name not in _NOT_WEIGHTS):
        return _from_files([regular_file(f, folder) for f in files], _bin_infos)
    raise CheckpointNotFound(
        f"no weights in {folder}: looked for {SAFETENSORS}, {SAFETENSORS_INDEX}, *.safetensors, {PT_BIN}, "
        f"{PT_BIN_INDEX} and *.bin")


def read_tensors(infos: Mapping[str, TensorInfo], names: Iterable[str], *, finite: bool = False) -> dict[str, Tensor]:
    """Read the data of the named tensors (checkpoint names), opening each file once. With ``finite``, a
    floating-point tensor holding NaN or inf is a CheckpointError naming the file and the tensors."""
    names = list(names)
    unknown = [n for n in names if n not in infos]
    if unknown:
        raise KeyError(f"not in the checkpoint listing: {short_list(unknown, 10)}")
    by_file: dict[Path, list[str]] = {}
    for name in names:
        by_file.setdefault(infos[name].file, []).append(name)
    out: dict[str, Tensor] = {}
    for file, wanted in by_file.items():
        if file.suffix == ".safetensors":
            try:
                with safe_open(str(file), framework="pt", device="cpu") as f:
                    out.update((n, f.get_tensor(n)) for n in wanted)
            except _READ_ERRORS as exc:  # the file changed or was truncated after it was listed
                raise CheckpointError(file, f"cannot be read: {short_text(exc, 300)}") from None
        else:
            state = _torch_load(file)
            out.update((n, state[n]) for n in wanted)
        if finite and (bad := nonfinite({n: out[n] for n in wanted})):
            raise CheckpointError(file, "NaN or inf values in " + ", ".join(
                f"{short(n)} ({k} of {out[n].numel()})" for n, k in bad[:5]) + (
                f" and {len(bad) - 5} more tensors" if len(bad) > 5 else ""))
    return {n: out[n] for n in names}


def nonfinite(tensors: Mapping[str, Tensor]) -> list[tuple[str, int]]:
    """(name, count) of the floating-point tensors holding NaN or inf. One float32 sum per tensor (no copy): a
    non-finite element makes it non-finite; only then are the elements counted."""
    out = []
    for name, t in tensors.items():
        if not t.is_floating_point() or t.numel() == 0 or t.dtype == FLOAT4:
            continue
        try:
            suspect = not bool(torch.isfinite(t.sum(dtype=torch.float32)))
        except (RuntimeError, TypeError):  # float8 kinds without a sum kernel
            suspect = True
        if suspect and (count := int((~torch.isfinite(t.float())).sum())):
            out.append((name, count))
    return out


def save_safetensors(tensors: Mapping[str, Tensor], folder: str | Path, filename: str = SAFETENSORS) -> Path:
    """Write tensors to folder/filename (creating the folder); views and shared storages are copied out first. The
    file is written beside it and renamed over it, so a run killed while writing leaves the previous file whole (a
    training checkpoint half written could not be resumed)."""
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
    path, tmp = folder / filename, folder / (filename + ".tmp")
    save_file(flat, str(tmp), metadata={"format": "pt"})
    tmp.replace(path)
    return path
