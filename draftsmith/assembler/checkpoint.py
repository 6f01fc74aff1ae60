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

import functools
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor

from draftsmith import limits
from draftsmith.errors import CheckpointError, CheckpointNotFound, short, short_list, short_text
from draftsmith.paths import checkpoint_folder, utf8_problem
from draftsmith.assembler.weight_files import (FLOAT4, READ_ERRORS, TensorInfo, bin_infos, check_names,
                                               safetensors_infos, torch_load)

__all__ = ["TensorInfo", "list_tensors", "read_json", "read_tensors", "regular_file", "save_safetensors"]
ALLOW_OUTSIDE = "DRAFTSMITH_ALLOW_OUTSIDE_LINKS"

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PT_BIN = "pytorch_model.bin"
PT_BIN_INDEX = "pytorch_model.bin.index.json"
# Pickles that sit beside weights in trainer output folders and hold no tensors.
_NOT_WEIGHTS = frozenset({"training_args.bin"})



def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (links resolved) stays in ``folder``; a Hugging Face cache snapshot's blobs count as inside."""
    real, root = path.resolve(), folder.resolve()
    if real.is_relative_to(root) or os.environ.get(ALLOW_OUTSIDE) == "1":
        return True
    # huggingface_hub: <repo>/snapshots/<revision>/<file> -> <repo>/blobs/<sha>
    return root.parent.name == "snapshots" and real.is_relative_to(root.parent.parent / "blobs")


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


def _from_index(folder: Path, index: Path, reader) -> dict[str, TensorInfo]:
    weight_map = read_json(index, folder, what="shard index (an object with a 'weight_map')").get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(index, "no 'weight_map' mapping tensor names to shard files")
    check_names(index, weight_map, len(weight_map))
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


def unlisted(infos: Mapping[str, TensorInfo]) -> dict[str, str]:
    """Tensors the files of a listing hold that it leaves out (name -> file name): those a sharded checkpoint's index
    does not list, which every reader (transformers too) goes by, so a stale index hides them. Headers only for
    safetensors, a .bin is loaded (memory-mapped); {} where a file cannot be read (what reads it says why)."""
    held: dict[str, str] = {}
    for file in sorted({info.file for info in infos.values()}):
        reader = safetensors_infos if file.suffix == ".safetensors" else bin_infos
        try:
            held.update((n, file.name) for n in reader(file) if n not in infos)
        except (CheckpointError, OSError):
            return {}
    return held


def _from_files(files: list[Path], reader) -> dict[str, TensorInfo]:
    out: dict[str, TensorInfo] = {}
    for file in files:
        infos = reader(file)
        check_names(file.parent, (), len(out) + len(infos))  # the files together, too
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
        return safetensors_infos(folder / SAFETENSORS)
    if _present(folder / SAFETENSORS_INDEX):
        return _from_index(folder, folder / SAFETENSORS_INDEX, safetensors_infos)
    if files := sorted(folder.glob("*.safetensors")):
        return _from_files([regular_file(f, folder) for f in files], safetensors_infos)
    if _present(folder / PT_BIN):
        return bin_infos(folder / PT_BIN)
    if _present(folder / PT_BIN_INDEX):
        return _from_index(folder, folder / PT_BIN_INDEX, bin_infos)
    if files := sorted(f for f in folder.glob("*.bin") if f.name not in _NOT_WEIGHTS):
        return _from_files([regular_file(f, folder) for f in files], bin_infos)
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
            except READ_ERRORS as exc:  # the file changed or was truncated after it was listed
                raise CheckpointError(file, f"cannot be read: {short_text(exc, 300)}") from None
        else:
            state = torch_load(file)
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


def save_safetensors(tensors: Mapping[str, Tensor], folder: str | Path, filename: str = SAFETENSORS,
                     metadata: Mapping[str, str] | None = None) -> Path:
    """Write tensors to folder/filename (creating the folder); views and shared storages are copied out first. The
    file is written beside it and renamed over it, so a run killed while writing leaves the previous file whole (a
    training checkpoint half written could not be resumed), and a write that fails removes what it wrote."""
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
    try:
        save_file(flat, str(tmp), metadata={"format": "pt", **(metadata or {})})
        tmp.chmod(file_mode())   # safetensors writes 0600 whatever the umask: a converted draft others cannot read
    except BaseException:   # a full disk, a Ctrl-C: no partial file is left beside the whole one
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)
    return path


def file_mode() -> int:
    """The mode ``open()`` gives a new file under this process's umask (0o644 under 022), read from
    /proc/self/status: os.umask(0) to learn it would give another thread's new files 0o666 for that moment.
    Elsewhere (no /proc), learnt that way once, with 0o022 set for the moment, never 0."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            mask = next((int(line.split()[1], 8) for line in f if line.startswith("Umask:")), None)
    except (OSError, ValueError, IndexError):
        mask = None
    return 0o666 & ~(_umask() if mask is None else mask)


@functools.cache
def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
