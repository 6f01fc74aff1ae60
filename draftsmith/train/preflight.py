"""The checks of a training job (:class:`draftsmith.train.Job`) that need neither the target's weights nor the
data's text: the paths it names, before anything slow starts; and what to say when the data gives no window."""
from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import torch

from draftsmith import hub
from draftsmith.errors import DraftsmithError, short_list, short_text
from draftsmith.specs.loader import load_spec
from draftsmith.train import data as D
from draftsmith.train.checks import TrainError
from draftsmith.train.features import SHARDS, read_meta, shard_problem
from draftsmith.train.loop import FRESH, STATE


def preflight(job) -> None:
    """Every check that needs neither the target's weights nor the data's text, so that a mistake is reported at
    once: the target folder (a cached name is fetched later), the data and held-out paths, the out and features
    folders, and the spec. A TrainError lists every problem found."""
    found = []
    try:
        load_spec(job.spec)
    except DraftsmithError as e:
        found.append(("spec", f"is not usable: {e}"))
    if str(job.target) not in hub.SOURCES and hub.cache_name(str(job.target)) is None:
        t, name = Path(job.target), f"folder {short_text(job.target, 300)}"
        if not t.is_dir():
            found.append(("target", f"{name} {'is not a folder' if t.exists() else 'does not exist'}"))
        elif not (t / "config.json").is_file():
            found.append(("target", f"{name} has no config.json (not a Hugging Face model folder)"))
    for name in ("data", "held_out"):
        found += [(name, f"{short_text(p, 300)}: no such file or folder") for p in map(Path, getattr(job, name))
                  if not (p.is_file() or p.is_dir())]
    out = Path(job.out)
    if out.exists() and not out.is_dir():
        found.append(("out", f"{short_text(out, 300)} is not a folder"))
    if job.eval_only:
        if not job.held_out:
            found.append(("eval_only", "needs held-out text: give --eval PATH (repeatable) or --stdlib"))
        if not job.eval_prompts:
            found.append(("eval_prompts", "0: allowed an integer >= 1 with --eval-only (0 measures nothing)"))
        if not all((out / f).is_file() for f in ("config.json", "model.safetensors")):
            found.append(("out", f"{short_text(out, 300)} holds no draft (config.json and model.safetensors): train "
                                 "one first, without --eval-only"))
    elif not job.data:
        found.append(("", "no training data: give --data PATH (repeatable) or --stdlib"))
    elif not found and not D.expand(job.data):
        found.append(("data", f"{short_list(job.data, quote=False)}: no text or JSONL files, so no training windows"))
    if not job.eval_only:
        found += feature_problems(job)
        if (out / STATE).is_file() and not zipfile.is_zipfile(out / STATE):   # torch.save writes a zip archive
            found.append(("", f"{short_text(out / STATE, 300)} is not a trainer state (not a torch.save archive); "
                              f"{FRESH}"))
    if found:
        raise TrainError(found)


def feature_problems(job) -> list[tuple[str, str]]:
    """The features folder: a folder whose features.json (when there) is one :func:`read_meta` accepts and whose
    shards' headers are readable; holding shards when max_windows is 0 (train on those alone); else holding none
    or those of windows of job.seq tokens (a resumed run extracts more of the same)."""
    feats = Path(job.features or Path(job.out) / "features")
    if feats.exists() and not feats.is_dir():
        return [("features", f"{short_text(feats, 300)} is not a folder")]
    try:
        meta = read_meta(feats)
    except TrainError as e:
        return e.problems
    if bad := shard_problem(feats, meta):
        return [("", bad)]
    if job.max_windows == 0:
        if meta is not None and any(feats.glob(SHARDS)):
            return []
        return [("max_windows", f"0: no features in {short_text(feats, 300)} to train on (0 uses only the features "
                                "already on disk)")]
    if meta is None or meta["seq"] == job.seq:
        return []
    return [("seq", f"{job.seq}: {short_text(feats, 300)} holds features of {meta['seq']}-token windows; give seq "
                    f"{meta['seq']} to resume, or another features folder")]


def no_windows(job, files: Sequence[Path], docs: Sequence[str], ids: torch.Tensor,
               skipped: Sequence[Path] = ()) -> TrainError:
    """What the data held, when it gives no window of job.seq tokens."""
    held = f"{count(files, 'file')}, {count(docs, 'document')}, {count(ids, 'token')} in all{skipped_note(skipped)}"
    if not docs:
        return TrainError([("data", f"{short_list(job.data, quote=False)}: the data gave no training windows "
                                    f"({held}: no text)")])
    return TrainError([("seq", f"{job.seq}: the data gave no training windows ({held}; a window is {job.seq} "
                               "tokens)")])


def skipped_note(skipped: Sequence[Path]) -> str:
    """', 2 files skipped (not UTF-8 text, or unreadable): a.bin, b.txt', or '' when none was."""
    if not skipped:
        return ""
    return (f", {count(skipped, 'file')} skipped (not UTF-8 text, or unreadable): "
            f"{short_list(skipped, 3, 120, quote=False)}")


def count(items, word: str) -> str:
    return f"{len(items)} {word}{'' if len(items) == 1 else 's'}"
