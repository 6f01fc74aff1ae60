"""Why a target's tokenizer cannot be read (:func:`draftsmith.assembler.assemble.read_tokenizer`): a tokenizer file
that is no JSON object, or a tokenizer that is the checkpoint's own code. draftsmith never runs a checkpoint's code
(``trust_remote_code`` is never passed): Kimi-K2's ``tokenizer_config.json`` names ``tokenization_kimi.
TikTokenTokenizer`` (over ``tiktoken.model``) in its ``auto_map``, which transformers refuses to read without running
it; such a target decodes token ids, and a text prompt is refused with the reason (``--token-ids`` instead)."""
from __future__ import annotations

import codecs
import json
from pathlib import Path

from draftsmith.assembler.checkpoint import read_json
from draftsmith.errors import CheckpointError, short, short_text

TOKENIZER_CONFIG = "tokenizer_config.json"


def unreadable_json(files: list[Path]) -> Path | None:
    """The first of a tokenizer's .json files that is not a JSON object, or that starts with a UTF-8 byte-order mark
    (which Python's json reads from bytes and transformers does not), or None: transformers' error does not say
    which file it was reading."""
    for path in (f for f in files if f.suffix == ".json"):
        try:
            data = path.read_bytes()
            if data.startswith(codecs.BOM_UTF8) or not isinstance(json.loads(data), dict):
                return path
        except (OSError, ValueError, RecursionError):
            return path
    return None


def remote_tokenizer(folder: str | Path) -> str | None:
    """The class of the checkpoint's own code that ``tokenizer_config.json``'s ``auto_map`` names for AutoTokenizer
    (``tokenization_kimi.TikTokenTokenizer``; of a [slow, fast] pair the first named), or None (no such file, no such
    entry, a file that is no JSON object: read_tokenizer says what is wrong with it)."""
    path = Path(folder) / TOKENIZER_CONFIG
    if not path.exists():
        return None
    try:   # a FIFO, a link out of the folder, bad JSON: refused by read_json, unread
        written = read_json(path, Path(folder), what="tokenizer config")
    except (CheckpointError, OSError):
        return None
    auto_map = written.get("auto_map")
    entry = auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else None
    named = [entry] if isinstance(entry, str) else [e for e in entry if isinstance(e, str)] \
        if isinstance(entry, list) else []
    return named[0] if named else None


def remote_code_reason(folder: str | Path, exc: BaseException) -> str | None:
    """Why transformers could not read the tokenizer of ``folder`` (``exc``, its error without remote code) where
    the folder's tokenizer is the checkpoint's own code (:func:`remote_tokenizer`), as draftsmith says it; None where
    it is not (the error is the files')."""
    if (name := remote_tokenizer(folder)) is None:
        return None
    said = str(exc)   # transformers' refusal to read them without the code advises running it: not said
    theirs = ("transformers reads these tokenizer files only through it" if "trust_remote_code" in said else
              f"transformers' own reading of the tokenizer files failed: {short_text(said, 300).rstrip('.')}")
    return (f"its tokenizer is the checkpoint's own code ({TOKENIZER_CONFIG} auto_map AutoTokenizer: {short(name)}), "
            f"which draftsmith never runs (no trust_remote_code), and {theirs}. Give the prompt as token ids "
            "(--token-ids 1,2,3; generate(): a list of ids), or give the folder a tokenizer transformers reads itself "
            f"(a tokenizer.json, and a {TOKENIZER_CONFIG} whose auto_map names no AutoTokenizer)")


def auto_tokenizer(folder: str | Path):
    """``AutoTokenizer.from_pretrained(folder, trust_remote_code=False)``; where the folder's tokenizer is its own code
    (:func:`remote_tokenizer`), transformers' logger is quiet meanwhile: its warning that a ``kimi_k2`` config makes
    a model of type ``''`` is about the config it reads aside, which draftsmith reads itself (as deepseek_v3)."""
    from contextlib import nullcontext

    from transformers import AutoTokenizer

    from draftsmith.hub import quiet_transformers

    with quiet_transformers() if remote_tokenizer(folder) is not None else nullcontext():
        return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)


def remote_tokenizer_problem(folder: str | Path) -> str | None:
    """:func:`remote_code_reason` of the folder's tokenizer, found before any model loads (AutoTokenizer tried only
    where its auto_map names one), or None where transformers reads it, or it names none."""
    if remote_tokenizer(folder) is None:
        return None
    try:
        auto_tokenizer(folder)
    except Exception as exc:  # noqa: BLE001 (transformers' refusal of remote code, a missing package, ...)
        return remote_code_reason(folder, exc)
    return None
