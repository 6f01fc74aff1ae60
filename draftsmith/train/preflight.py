"""The checks of a training job (:class:`draftsmith.train.Job`) that need neither the target's weights nor the
data's text: the paths it names, before anything slow starts; and what to say when the data gives no window."""
from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import torch

from draftsmith import hub
from draftsmith.assembler.assemble import TOKENIZER_FILES
from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.assembler.config import read_config, read_raw_config
from draftsmith.assembler.detect import draft_in
from draftsmith.errors import DraftsmithError, short_list, short_text
from draftsmith.specs.loader import load_spec
from draftsmith.train import data as D
from draftsmith.train.checks import TrainError
from draftsmith.train.features import SHARDS, read_meta, shard_problem
from draftsmith.train.loop import FRESH, STATE


def preflight(job) -> None:
    """Every check that needs neither the target's weights nor the data's text, so that a mistake is reported at
    once: the target folder, its tokenizer and context (a cached name is fetched later), the data and held-out
    paths, the out, features and --from-draft folders, and the spec. A TrainError lists every problem found."""
    found = []
    try:
        load_spec(job.spec)
    except DraftsmithError as e:
        found.append(("spec", f"is not usable: {e}"))
    found += target_problems(job)
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
        if not holds_draft(out):
            found.append(("out", f"{short_text(out, 300)} holds no draft ({DRAFT}): train "
                                 "one first, without --eval-only"))
        if job.from_draft:
            found.append(("from_draft", "starts a training run: --eval-only measures the draft in --out"))
    elif not job.data:
        found.append(("", "no training data: give --data PATH (repeatable) or --stdlib"))
    elif not found and not D.expand(job.data):
        found.append(("data", f"{short_list(job.data, quote=False)}: no text or JSONL files, so no training windows"))
    if not job.eval_only:
        found += out_problems(job) + feature_problems(job)
        if (out / STATE).is_file() and not zipfile.is_zipfile(out / STATE):   # torch.save writes a zip archive
            found.append(("", f"{short_text(out / STATE, 300)} is not a trainer state (not a torch.save archive); "
                              f"{FRESH}"))
    if found:
        raise TrainError(found)


def target_problems(job) -> list[tuple[str, str]]:
    """A target folder: its config.json, a tokenizer (the data is read with it) and, when training, a context
    (max_position_embeddings) that holds a window of job.seq tokens. A cached name is checked once fetched (the
    command line fetches it, then :func:`draftsmith.train.run` runs preflight again on its folder)."""
    if str(job.target) in hub.SOURCES or hub.cache_name(str(job.target)) is not None:
        return []
    t, name = Path(job.target), f"folder {short_text(job.target, 300)}"
    if not t.is_dir():
        return [("target", f"{name} {'is not a folder' if t.exists() else 'does not exist'}")]
    if not (t / "config.json").is_file():
        return [("target", f"{name} has no config.json (not a Hugging Face model folder)")]
    found = []
    if not any((t / f).is_file() for f in TOKENIZER_FILES):
        found.append(("target", f"{name} has no tokenizer ({', '.join(TOKENIZER_FILES[:-1])} or "
                                f"{TOKENIZER_FILES[-1]}), which reads the data{draft_hint(t)}"))
    try:
        context = read_config(t).get("max_position_embeddings")
    except DraftsmithError as e:
        return [*found, ("target", f"{name}: {e}")]
    if not job.eval_only and isinstance(context, int) and job.seq > context:
        found.append(("seq", f"{job.seq}: allowed an integer up to {context}, the target's context "
                             f"(max_position_embeddings in {short_text(t / 'config.json', 300)})"))
    return found


def draft_hint(folder: Path) -> str:
    """'; it holds a draft (spec eagle3-llama), ...' for a folder that is no whole model and that a layout
    detector recognises (detect.draft_in, as assemble's note on swapped folders), else ''."""
    from draftsmith.registry import default_registry

    try:
        names = list(list_tensors(folder))
        match = draft_in(default_registry(), read_raw_config(folder), names)
    except DraftsmithError:   # unreadable: the load says why
        return ""
    return (f"; it holds a draft (spec {match.spec}), not a target: give the target folder the draft is for as "
            "--target") if match else ""


DRAFT = "config.json and weights (safetensors or .bin, sharded or not)"


def holds_draft(folder: Path) -> bool:
    """A config.json and tensors in any weights format the assembler reads (draftsmith.assembler.checkpoint)."""
    if not (folder / "config.json").is_file():
        return False
    try:
        return bool(list_tensors(folder))
    except DraftsmithError:
        return False


def out_problems(job) -> list[tuple[str, str]]:
    """A training run's out folder: new, empty, or one a run of its own left (trainer.pt, which resumes; else only
    the features folder, which is reused), so that a draft put there is never overwritten by accident; and the
    draft --from-draft starts from."""
    out, feats = Path(job.out), Path(job.features or Path(job.out) / "features")
    found = []
    if job.from_draft and not holds_draft(Path(job.from_draft)):
        found.append(("from_draft", f"{short_text(job.from_draft, 300)} holds no draft "
                                    f"({DRAFT})"))
    if not out.is_dir() or (out / STATE).exists():
        return found
    held = sorted(p.name for p in out.iterdir() if p.resolve() != feats.resolve())
    if held:
        start = (f", or --from-draft {short_text(out, 300)} with a new --out to train on from the draft it holds"
                 if holds_draft(out) else "")
        found.append(("out", f"{short_text(out, 300)} holds {short_list(held, quote=False)} but no {STATE}, so "
                             f"there is no run to resume and training would overwrite it: give a new or empty "
                             f"--out{start}"))
    return found


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
