"""What a resumed run must keep: trainer.pt records the run's settings (:func:`run_record`) beside its TrainConfig,
and :func:`resume_problems` names each one a resumed run would change (preflight runs it before anything starts)."""
from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import asdict
from pathlib import Path

import torch

from draftsmith.errors import short, short_list, short_text
from draftsmith.options import flag
from draftsmith.train.provenance import target_changed, target_fingerprint
from draftsmith.train.loop import RESUMABLE, STATE


def saved_state(out: Path) -> dict | None:
    """trainer.pt's config, run record and step ({"config": ..., "run": ... or None, "step": ...}), read
    memory-mapped; None when there is none or it is no trainer state (load_state says so, with how to start
    fresh)."""
    if not (out / STATE).is_file() or not zipfile.is_zipfile(out / STATE):
        return None
    try:
        state = torch.load(out / STATE, weights_only=True, mmap=True, map_location="cpu")
        return {"config": dict(state["config"]), "run": state.get("run"), "step": state.get("step")}
    except Exception:   # noqa: BLE001 - not a trainer state
        return None


def resume_problems(job, spec=None, taps: list[int] | None = None) -> list[tuple[str, str]]:
    """A resumed run's settings against those it was started with (trainer.pt's config and run record): only
    --steps, --minutes and --save-every may change among the hyperparameters, and the run's own settings
    (:func:`run_record`: spec and taps, seq, data, --chat, features folder, self-distillation, target) not at all; any
    other change would silently retrain under new settings (and overwrite the record of the old ones), so each
    is named with its old and new value. A trainer.pt an older draftsmith wrote has no run record: the run
    warns (pipeline) and goes on."""
    out = Path(job.out)
    if job.eval_only or (saved := saved_state(out)) is None:
        return []
    now, old = asdict(job.config), saved["config"]
    changed = [(k, _said(k, now[k]), _said(k, old[k]), _said(k, old[k])) for k in now
               if k not in RESUMABLE + FRESH_ONLY and k in old and old[k] != now[k]]
    if isinstance(saved["run"], dict):
        changed += run_changes(saved["run"], run_record(job, spec, taps), out)
    keep = ", ".join(f"--{k.replace('_', '-')}" for k in RESUMABLE)
    return [(k, f"{new}: the run in {short_text(out, 300)} was started with {was}, and a resumed run keeps its "
                f"settings (only {keep} may change): give {give} again, or a new --out for a new run "
                f"(--from-draft {short_text(out, 300)} starts one from its draft)")
            for k, new, was, give in changed]


def _said(name: str, value) -> str:
    """A setting's value as the command line gives it: a boolean as its flag (--freeze-head, --no-bf16)."""
    return flag(name.replace("_", "-"), value) if isinstance(value, bool) else short(value)


def spec_digest(spec) -> str:
    """What of a spec shapes the draft it trains and exports: its draft section, weight rules and quant (not its
    name, description, checkpoints or decoding)."""
    dump = spec.model_dump(mode="json")
    text = json.dumps({k: dump[k] for k in ("draft", "weights", "quant")}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def features_ref(job) -> str:
    """The features folder, relative to --out when inside it (an out folder moved as a whole resumes)."""
    out, feats = Path(job.out).resolve(), Path(job.features or Path(job.out) / "features").resolve()
    return str(feats.relative_to(out)) if feats.is_relative_to(out) else str(feats)


def run_record(job, spec, taps) -> dict:
    """The settings of a run that trainer.pt records and a resumed run must keep, beside its TrainConfig: they
    decide what the draft is and which windows it trains on, and a change went unnoticed where the features were
    made anew (3 steps on taps [2, 4, 5], 3 more on [3, 5, 6], config.json then stating the first). None where
    not known yet (a spec that did not load, taps not told, a cached target not fetched): not compared.
    --max-windows (more windows may be extracted), --distill-batch (batching only), --from-draft and
    --draft-vocab (a new run's start only), the held-out text and --device may change."""
    target = Path(str(job.target)) if job.target is not None else None
    return {"spec": None if spec is None else spec.name, "spec_digest": None if spec is None else spec_digest(spec),
            "spec_given": spec_ref(getattr(job, "spec", None), spec),
            "taps": None if taps is None else [int(t) for t in taps], "seq": job.seq,
            "data": [str(Path(p).resolve()) for p in job.data], "features": features_ref(job),
            "self_distill": job.self_distill, "prompts_per_doc": job.prompts_per_doc if job.self_distill else None,
            "chat": job.chat,
            "target": target_fingerprint(target) if target and (target / "config.json").is_file() else None,
            "target_folder": None if target is None else str(target)}   # for the message only


def spec_ref(given, spec) -> str | None:
    """--spec as a later command gives it again: a spec file's absolute path, a spec name as it is (a file's
    ``name:`` is no name --spec finds)."""
    if spec is None:
        return None
    if isinstance(given, (str, Path)) and Path(given).is_file():
        return str(Path(given).resolve())
    return given if isinstance(given, str) else spec.name if spec.source.startswith("<") else spec.source


def same_spec(old: dict, spec) -> bool:
    """Whether a run record's spec shapes the draft as ``spec`` does: by what shapes it (:func:`spec_digest`; its
    name aside), or by name where the record is older than the digest."""
    return _same_spec(old, {"spec": spec.name, "spec_digest": spec_digest(spec)})


def _same_spec(old: dict, now: dict) -> bool:
    return old["spec_digest"] == now["spec_digest"] if old.get("spec_digest") else old.get("spec") == now["spec"]


def run_changes(old: dict, now: dict, out: Path) -> list[tuple[str, str, str, str]]:
    """(field, new, old, what to give) for each recorded setting that differs, where both records state it. The
    spec is named with the taps it reads when those differ too; the target by its folder (its fingerprint is
    compared, on the fields both records state, so a target moved elsewhere resumes); the features folder as a
    path (under ``out`` when recorded relative to it)."""
    known = lambda k: old.get(k) is not None and now.get(k) is not None   # noqa: E731
    found = []
    if known("spec") and not _same_spec(old, now) or known("taps") and old["taps"] != now["taps"]:
        taps = known("taps") and old["taps"] != now["taps"]
        name = lambda r: f"{r['spec']}" + (f" (taps {r['taps']})" if taps else "")   # noqa: E731
        same = old["spec"] == now["spec"] and not taps
        changed = " (its draft, weights or quant section changed since)" if same else ""
        give = old.get("spec_given") or old["spec"]
        if give == now.get("spec_given"):   # the same file, edited since: giving it again would not help
            give = f"{give} as it was when the run started"
        found.append(("spec", name(now), name(old) + changed, give))
    for k in ("seq", "self_distill", "prompts_per_doc"):
        if known(k) and old[k] != now[k]:
            found.append((k, short(now[k]), short(old[k]), short(old[k])))
    if known("chat") and old["chat"] != now["chat"]:   # a flag: said as the option that gives it
        found.append(("chat", flag("chat", now["chat"]), flag("chat", old["chat"]), flag("chat", old["chat"])))
    if known("features") and old["features"] != now["features"]:
        new, was = (short_text(Path(out) / f, 300) for f in (now["features"], old["features"]))   # absolute: kept
        found.append(("features", new, was, was))
    if known("data") and old["data"] != now["data"]:
        was = short_list(old["data"], quote=False)
        found.append(("data", short_list(now["data"], quote=False), was, was))
    if known("target") and target_changed(old["target"], now["target"]):   # a field one record lacks: not compared
        folder = short_text(old.get("target_folder"), 300)
        found.append(("target", short_text(now.get("target_folder"), 300), f"a target of another config.json, "
                      f"weight files (names, sizes or content) or hidden size ({folder})",
                      f"the target it was started with ({folder})"))
    return found


FRESH_ONLY = ("init",)   # TrainConfig fields only a fresh draft reads: a resumed run ignores them, so may differ
