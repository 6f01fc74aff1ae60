"""What a features folder was made from, recorded in its features.json so that a later run can tell its own
source from another's: the target (config, weight file sizes and a sampled content digest), the token windows,
the precision and the self-distillation settings. A features.json an older draftsmith wrote may lack any of them;
what it lacks is not compared."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from draftsmith.errors import short, short_text
from draftsmith.options import flag


def _target_ok(v) -> bool:
    # "content" is absent from the records of a draftsmith before it (features.json, trainer.pt): not compared
    return (isinstance(v, dict) and set(v) - {"content"} == {"config", "weights", "hidden_size"}
            and isinstance(v["config"], str)
            and isinstance(v["weights"], dict) and all(isinstance(k, str) and isinstance(n, int)
                                                       for k, n in v["weights"].items())
            and (v["hidden_size"] is None or isinstance(v["hidden_size"], int))
            and (isinstance(v.get("content"), dict) and all(isinstance(k, str) and isinstance(h, str)
                                                            for k, h in v["content"].items())
                 if "content" in v else True))


def _distill_ok(v) -> bool:
    small = lambda n: isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**32   # noqa: E731
    return v is None or (isinstance(v, dict) and set(v) == {"tokens", "seed", "new_tokens", "per_doc"}
                         and isinstance(v["tokens"], str) and all(small(v[k]) for k in ("seed", "new_tokens",
                                                                                         "per_doc")))


SOURCE = {  # what else the features depend on (absent from a features.json an older draftsmith wrote)
    "target": _target_ok, "windows": lambda v: isinstance(v, str), "bf16": lambda v: isinstance(v, bool),
    "distill": _distill_ok}   # distill_record: None without self-distillation
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


SAMPLE_ENDS = 1 << 20      # the content digest reads each weight file's first and last MiB,
SAMPLE_BLOCKS = 16         # this many blocks evenly spaced between them,
SAMPLE_BLOCK = 1 << 16     # of 64 KiB each (3 MiB a file at most, beside a safetensors header),
HEADER_BYTES = 100 << 20   # and a safetensors header up to this size (the format's own limit)


def content_digest(path: Path) -> str:
    """A sha256 of a weight file's content, read cheaply: the file whole when it is at most the sample's size, else
    its safetensors header (the tensors' names, dtypes, shapes and offsets), its first and last ``SAMPLE_ENDS`` bytes
    and ``SAMPLE_BLOCKS`` blocks of ``SAMPLE_BLOCK`` bytes evenly spaced between them. A retrained target's weights
    differ nearly everywhere, so the sample tells it from the old one; a change confined to bytes outside the
    sample (one tensor edited by hand) is not seen."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        if size <= 2 * SAMPLE_ENDS + SAMPLE_BLOCKS * SAMPLE_BLOCK:
            while chunk := f.read(1 << 20):
                h.update(chunk)
            return h.hexdigest()[:16]
        n = int.from_bytes(f.read(8), "little")
        if path.name.endswith(".safetensors") and n <= min(HEADER_BYTES, size - 8):
            h.update(f.read(n))   # the whole header, past the first MiB too (a model of very many tensors)
        span = size - 2 * SAMPLE_ENDS - SAMPLE_BLOCK
        for at, n in ([(0, SAMPLE_ENDS)] + [(SAMPLE_ENDS + span * i // (SAMPLE_BLOCKS - 1), SAMPLE_BLOCK)
                                            for i in range(SAMPLE_BLOCKS)] + [(size - SAMPLE_ENDS, SAMPLE_ENDS)]):
            f.seek(at)
            h.update(f.read(n))
    return h.hexdigest()[:16]


def target_fingerprint(folder: Path) -> dict:
    """What a target's features depend on, read cheaply (no tensor): its config.json's content (a sha256), the
    names and sizes of its weight files, their content (:func:`content_digest`: a sha256 of a bounded sample of
    each file, so a retrained target of the same shapes differs too) and its hidden size. Two targets that differ
    here give other features."""
    folder = Path(folder)
    raw = (folder / "config.json").read_bytes()
    try:
        cfg = json.loads(raw)
    except (ValueError, RecursionError):
        cfg = {}
    cfg = cfg if isinstance(cfg, dict) else {}
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    hidden = cfg.get("hidden_size", text.get("hidden_size"))
    files = [p for p in sorted(folder.iterdir()) if p.name.endswith(WEIGHT_SUFFIXES) and p.is_file()]
    return {"config": hashlib.sha256(raw).hexdigest()[:16], "weights": {p.name: p.stat().st_size for p in files},
            "hidden_size": hidden if isinstance(hidden, int) and not isinstance(hidden, bool) else None,
            "content": {p.name: content_digest(p) for p in files}}


def target_changed(found: dict, want: dict) -> bool:
    """Whether two :func:`target_fingerprint` records differ on a field both state (a record an older draftsmith
    wrote has no "content": it is not compared on it)."""
    if not (isinstance(found, dict) and isinstance(want, dict)):
        return found != want
    return any(found[k] != want[k] for k in found.keys() & want.keys())


def target_differences(found: dict, want: dict) -> list[str]:
    """What differs between two :func:`target_fingerprint` records, on the fields both state: a record an older
    draftsmith wrote has no "content", and is not compared on it (as a features.json without a key is not)."""
    out = []
    if found["hidden_size"] != want["hidden_size"]:
        out.append(f"they are of a target of hidden size {found['hidden_size']}, this one's is {want['hidden_size']}")
    if found["config"] != want["config"]:
        out.append("the target's config.json differs")
    if found["weights"] != want["weights"]:
        out.append(f"the target's weight files differ ({short(found['weights'], 80)}, now "
                   f"{short(want['weights'], 80)})")
    elif "content" in found and "content" in want and found["content"] != want["content"]:
        out.append("the target's weights differ in content (same files and sizes: a retrained target?)")
    return out


def windows_digest(wins: torch.Tensor) -> str:
    """A sha256 of the token windows (their ids and order: the data, the tokenizer, --seq, --seed and
    self-distillation all show in it)."""
    return hashlib.sha256(wins.to(torch.int64).contiguous().numpy().tobytes()).hexdigest()[:16]


def distill_record(ids: torch.Tensor, seed: int, new_tokens: int, per_doc: int) -> dict:
    """What self-distilled windows are made from, known before the (slow) decode: a digest of the data's token ids,
    --seed, --self-distill and --prompts-per-doc (--seq is the features' own). Recorded in features.json, so a
    run whose self-distillation would give other windows is refused before it decodes and writes --out."""
    return {"tokens": windows_digest(ids), "seed": seed, "new_tokens": new_tokens, "per_doc": per_doc}


def distill_differences(found: dict | None, want: dict) -> list[str]:
    """What differs between the self-distillation a features.json records (None: none) and ``want``'s."""
    if found is None:
        return [f"they were made without self-distillation, this run has --self-distill {want['new_tokens']}"]
    out = [f"they were self-distilled with --{opt} {found[k]}, this run has {want[k]}"
           for k, opt in (("new_tokens", "self-distill"), ("per_doc", "prompts-per-doc"), ("seed", "seed"))
           if found[k] != want[k]]
    if found["tokens"] != want["tokens"]:
        out.append("they were self-distilled from other text (other --data or tokenizer)")
    return out


def source_differences(found: dict, want: dict) -> list[str]:
    """What differs between the source a features.json records (``found``) and this run's (``want``), for each
    key both state: ["the target's hidden size is 64, not 128", ...]; [] when nothing does. A features.json
    without a key (an older draftsmith's) is not compared on it."""
    out = []
    if found.get("target") is not None and want.get("target") is not None:
        out += target_differences(found["target"], want["target"])
    if found.get("windows") is not None and want.get("windows") is not None and found["windows"] != want["windows"]:
        out.append("the token windows differ (other --data, tokenizer, --seed or --self-distill)")
    if "distill" in found and want.get("distill") is not None and found["distill"] != want["distill"]:
        out += distill_differences(found["distill"], want["distill"])
    if found.get("bf16") is not None and want.get("bf16") is not None and found["bf16"] != want["bf16"]:
        out.append(f"they were extracted with {flag('bf16', found['bf16'])}, this run has {flag('bf16', want['bf16'])}")
    return out


def source_problem(folder: Path, found: dict | None, want: dict) -> tuple[str, str] | None:
    """("features", why) when the features in ``folder`` were made from another source than ``want``, else None."""
    if found is None or not (diff := source_differences(found, want)):
        return None
    return ("features", f"{short_text(folder, 300)} holds features made for another run: {'; '.join(diff)}; give a "
                        "new --features folder (or remove this one: its features are then extracted again)")
