"""The features folder a training job extracts into and reads (``--features``, default ``OUT/features``): checked
before anything slow starts (:func:`feature_problems`, from :func:`draftsmith.train.preflight.preflight`)."""
from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

from draftsmith.errors import count, short_list, short_text
from draftsmith.paths import folder_problem
from draftsmith.train.checks import TrainError
from draftsmith.train.features import META, SHARDS, made_for, read_meta, shard_problem
from draftsmith.train.provenance import source_problem, target_fingerprint


def feature_problems(job, taps: list[int] | None = None) -> list[tuple[str, str]]:
    """The features folder: a folder holding nothing extraction did not write (:func:`foreign`: not the user's
    own, which --features was once taken for and its shards written into), whose features.json (when there) is one
    :func:`read_meta` accepts and whose
    shards' headers are readable, shards never without a features.json (extract writes it first: such shards are
    not ours, and one of other taps crashed training after --out was written); holding shards when max_windows
    is 0 (train on those alone); holding none, or those of windows of job.seq tokens, of ``taps`` (the draft's,
    when known) and of this target and --bf16 (when the folder records them), whether more are extracted or
    not."""
    feats = Path(job.features or Path(job.out) / "features")
    if why := folder_problem(feats):   # before trainer.pt is written: a run refused after it could not be rerun
        said_with_out = job.features is None and folder_problem(Path(job.out))   # out's problem says it
        return [] if said_with_out else [("features", f"{short_text(feats, 300)}: {why}")]
    if others := foreign(feats, Path(job.out)):
        return [("features", f"{short_text(feats, 300)} holds {short_list(others, 3, 120, quote=False)}, which no "
                             f"extraction wrote (a features folder holds {META} and {SHARDS}): its shards would be "
                             "written among them, and a --data of that folder would read them as text; give a new "
                             "or empty features folder, or one a run extracted to")]
    try:
        meta = read_meta(feats)
    except TrainError as e:
        return e.problems
    if meta is None and (shards := sorted(p.name for p in feats.glob(SHARDS))):
        return [("features", f"{short_text(feats, 300)} holds {count(shards, 'feature shard')} "
                             f"({short_list(shards, 3, 80, quote=False)}) but no {META}, so what they were made for "
                             "(taps, window length, target, data) cannot be told: remove the folder (its features "
                             "are extracted again) or give another --features folder")]
    if bad := shard_problem(feats, meta):
        return [("", bad)]
    if job.max_windows == 0 and (meta is None or not any(feats.glob(SHARDS))):
        return [("max_windows", f"0: no features in {short_text(feats, 300)} to train on (0 uses only the features "
                                "already on disk)")]
    if meta is None:
        return []
    found = []
    if meta["seq"] != job.seq:
        found.append(("seq", f"{job.seq}: {short_text(feats, 300)} holds features of {meta['seq']}-token windows; "
                             f"give seq {meta['seq']} to resume, or another features folder"))
    if taps is not None and (bad := made_for(feats, meta, {"taps": list(taps)})):   # seq: said above
        found.append(("features", bad))
    if (Path(job.target) / "config.json").is_file():
        try:
            want = {"target": target_fingerprint(Path(job.target)), "bf16": job.config.bf16}
        except OSError:
            return found
        found += [bad] if (bad := source_problem(feats, meta, want)) else []
    return found


OWN = (META, SHARDS, "shard-*.tmp")   # what extract writes in a features folder (a .tmp: a shard being written)


def foreign(feats: Path, out: Path) -> list[str]:
    """The names in the features folder ``feats`` that extract did not write (:data:`OWN`), sorted; the --out
    folder inside it aside (as out_problems sets the features folder inside --out aside). [] when it is none, or
    --out itself (whose own rule, new or empty or a run's, out_problems checks)."""
    if not feats.is_dir() or same_folder(feats, out):
        return []
    try:
        names = [p for p in feats.iterdir() if not any(fnmatch(p.name, own) for own in OWN)]
    except OSError:   # unreadable: extraction says why
        return []
    return sorted(p.name for p in names if not same_folder(p, out))


def same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):   # a link loop: not the same as any folder we write
        return False
