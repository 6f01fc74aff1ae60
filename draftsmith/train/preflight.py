"""The checks of a training job (:class:`draftsmith.train.Job`) that need neither the target's weights nor the
data's text: the paths it names, before anything slow starts; and what to say when the data gives no window."""
from __future__ import annotations

import stat
import zipfile
from pathlib import Path


from draftsmith import hub
from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.assembler.config import read_config, read_raw_config
from draftsmith.errors import CheckpointNotFound, DraftsmithError, short_list, short_text
from draftsmith.paths import folder_problem
from draftsmith.specs.loader import load_spec
from draftsmith.specs.resolve import fusion_params
from draftsmith.train import data as D
from draftsmith.train.checks import TrainError
from draftsmith.train.draft_io import MAKERS, MAKES, export_refusals, for_training, fresh_taps, unsupported
from draftsmith.train.feature_checks import feature_problems
from draftsmith.train.loop import FRESH, STATE, TrainConfig
from draftsmith.train.resume import resume_problems
from draftsmith.train.target_checks import (detected_draft, device_problems, draft_hint,
                                            target_plan_problems, target_problems)


def preflight(job, *, refused: bool = False) -> None:
    """Every check that needs neither the target's weights nor the data's text, so that a mistake is reported at
    once: the target folder, its tokenizer and context (a cached name is fetched later), the data and held-out
    paths, the out, features and --from-draft folders, and the spec. A TrainError lists every problem found.
    ``refused``: the caller already found a problem (the command line's option bounds), so the target is not
    planned either (its first plan imports transformers: a mistyped --steps waited for it)."""
    found, spec, taps = [], None, None
    if not isinstance(job.config, TrainConfig):   # the Python API's Job(config={...}): not a config it reads
        found.append(("config", f"is a {type(job.config).__name__}, not a TrainConfig: give TrainConfig(...)"))
    found += device_problems(job.device)
    try:
        spec = load_spec(job.spec)
    except DraftsmithError as e:
        found.append(("spec", f"is not usable: {e}"))
    if job.target is None:   # the spec's checkpoints.target, as assemble() takes it
        job.target = spec_target(spec)
        if job.target is None:
            said = "" if spec is None else f", and spec {spec.name!r} names no checkpoints.target"
            found.append(("target", f"not given{said}: give a Hugging Face folder, or 'smollm2'"))
    if job.target is not None:
        found += target_problems(job)
    target_ok = not found
    if spec is not None and not found and not job.eval_only:
        try:
            found += fresh_problems(job, spec) + vocab_problems(job, spec)
            taps = planned_taps(job, spec)
        except DraftsmithError as e:   # a fresh draft's aux ids that do not fit the target
            hint = draft_hint(Path(job.target)).removeprefix("; ")
            found.append(("spec", f"{spec.name} does not fit the target: {e}{f'{chr(10)}note: {hint}' * bool(hint)}"))
    if spec is not None and not job.eval_only:   # what the run's export could not write, fresh or --from-draft
        found += [("spec", f"{spec.name}: train cannot export a draft with {why}") for why in export_refusals(spec)]
    for name in ("data", "held_out"):
        found += [(name, f"{short_text(p, 300)}: {why}") for p in map(Path, getattr(job, name))
                  if (why := path_problem(p))]
    out = Path(job.out)
    if job.eval_only:   # writes nothing: its --out must hold a draft (below)
        why = "is not a folder" if out.exists() and not out.is_dir() else None
    else:   # a folder, or one that can be made (not under a regular file, nor in /proc)
        why = folder_problem(out)
    if why:
        found.append(("out", f"{short_text(out, 300)}: {why}"))
    if job.eval_only:
        if not job.held_out:
            found.append(("eval_only", "needs held-out text: give --eval PATH (repeatable) or --stdlib"))
        if not job.eval_prompts:
            found.append(("eval_prompts", "0: allowed an integer >= 1 with --eval-only (0 measures nothing)"))
        if why := draft_problem(out):
            found.append(("out", f"{short_text(out, 300)} {why}"
                                 + (": train one first, without --eval-only" if why == NO_DRAFT else "")))
        if job.from_draft:
            found.append(("from_draft", "starts a training run: --eval-only measures the draft in --out"))
    elif not job.data:
        found.append(("", "no training data: give --data PATH (repeatable) or --stdlib"))
    elif not found and not D.expand(job.data, skip=(own := own_folders(job))):
        inside = [str(p) for p in map(Path, job.data) if any(within(p, o) for o in own)]
        why = (f" ({short_list(inside, quote=False)} is this run's --out or --features folder, or inside it, which "
               "is not read as data: give the data another folder)" if inside else "")
        found.append(("data", f"{short_list(job.data, quote=False)}: no text or JSONL files, so no training "
                              f"windows{why}"))
    if not job.eval_only:
        found += (from_draft_problems(job, spec, target_ok) + out_problems(job) + feature_problems(job, taps)
                  + resume_problems(job, spec, taps))
        if (out / STATE).is_file() and not zipfile.is_zipfile(out / STATE):   # torch.save writes a zip archive
            found.append(("", f"{short_text(out / STATE, 300)} is not a trainer state (not a torch.save archive); "
                              f"{FRESH}"))
        elif (out / STATE).is_file() and (why := resumable_problem(out)):   # a resume reads the draft beside it
            found.append(("out", f"{short_text(out, 300)} holds a trainer state to resume, but {why}: put the "
                                 "draft's files back, or give a new or empty --out to start fresh"))
    if not found and not refused:
        found += target_plan_problems(job)
    if found:
        raise TrainError(found)


def own_folders(job) -> tuple[Path, Path]:
    """The run's own folders (--out, its features), whose files are never read as --data or --eval text."""
    return Path(job.out), Path(job.features or Path(job.out) / "features")


def within(path: Path, folder: Path) -> bool:
    """Whether ``path`` (links resolved) is ``folder`` or inside it."""
    return path.resolve().is_relative_to(folder.resolve())


def path_problem(path: Path) -> str | None:
    """Why a --data / --eval path cannot be read as text files, or None: it must be a regular file or a folder
    (/dev/zero never ends, a FIFO blocks)."""
    try:
        mode = path.stat().st_mode
    except OSError as e:   # missing, a broken link, a name too long, no permission on the way
        return ("no such file or folder" if isinstance(e, (FileNotFoundError, NotADirectoryError))
                else f"cannot be read ({e.strerror or e})")
    except ValueError:     # a NUL in the name
        return "no such file or folder (a path cannot contain a NUL character)"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return f"is {'a FIFO' if stat.S_ISFIFO(mode) else 'a device or socket'}, not a regular file or folder"


def spec_target(spec) -> str | Path | None:
    """The target a spec names: a ``cache:NAME`` as written, else its folder (relative to the spec's file)."""
    from draftsmith.assembler.folders import checkpoint_ref

    ref = None if spec is None else checkpoint_ref(spec, "target")
    return ref if ref is None or hub.cache_name(ref) is not None else Path(ref)


DRAFT = "config.json and weights (safetensors or .bin, sharded or not)"
NO_DRAFT = f"holds no draft ({DRAFT})"


def draft_problem(folder: Path) -> str | None:
    """Why ``folder`` holds no draft train can read, or None: a config.json and tensors in any weights format the
    assembler reads (draftsmith.assembler.checkpoint). A weight file it cannot read (cut short, a bad header) is
    named with the assembler's own reason, not taken for an absent draft."""
    if not (folder / "config.json").is_file():
        return NO_DRAFT
    try:
        return None if list_tensors(folder) else NO_DRAFT
    except CheckpointNotFound:   # no weights file at all
        return NO_DRAFT
    except DraftsmithError as e:   # names the file and why it cannot be read
        return f"holds a draft whose weights cannot be read: {e}; save or copy that file again"


def resumable_problem(out: Path) -> str | None:
    """Why the draft a resumed run reads from ``out`` (beside its trainer.pt) cannot be read, or None: said before
    the data is read, not once the run assembles it."""
    if why := draft_problem(out):
        return why.removeprefix("holds ")
    try:
        read_raw_config(out)
    except DraftsmithError as e:
        return f"its config cannot be read: {e}"
    return None


def holds_draft(folder: Path) -> bool:
    return draft_problem(folder) is None


def out_problems(job) -> list[tuple[str, str]]:
    """A training run's out folder: new, empty, or one a run of its own left (trainer.pt, which resumes; else only
    the features folder, which is reused), so that a draft put there is never overwritten by accident."""
    out, feats = Path(job.out), Path(job.features or Path(job.out) / "features")
    found = []
    if not out.is_dir() or (out / STATE).exists():
        return found
    held = sorted(p.name for p in out.iterdir() if p.resolve() != feats.resolve())
    if held:   # --from-draft offered for a folder that holds a draft, not for the target (a whole model)
        same = job.target is not None and out.resolve() == Path(job.target).resolve()
        start = (" (it is the --target folder)" if same else
                 f", or --from-draft {short_text(out, 300)} with a new --out to train on from the draft it holds"
                 if holds_draft(out) and detected_draft(out) else "")
        found.append(("out", f"{short_text(out, 300)} holds {short_list(held, quote=False)} but no {STATE}, so "
                             f"there is no run to resume and training would overwrite it: give a new or empty "
                             f"--out{start}"))
    return found


def from_draft_problems(job, spec, target_ok: bool) -> list[tuple[str, str]]:
    """The draft --from-draft starts a new run from: a folder holding one (:func:`draft_problem`) that ``spec``
    loads onto the target, planned as assemble() plans it (configs, tensor names, shapes and dtypes against the
    models built on meta, the d2t / t2d; no other tensor is read), so that a folder of another spec, or the target
    itself, is refused here and not by the load once the data was read. Planned only with a spec, a target folder
    ``target_ok`` (preflight found no problem with it; a cached name is planned once fetched) and no run in --out
    to resume (which ignores --from-draft)."""
    if not job.from_draft or job.eval_only:
        return []
    folder = Path(job.from_draft)
    if not folder.exists():   # "holds no draft" would send the user looking inside a folder that is not there
        return [("from_draft", f"{short_text(folder, 300)}: no such folder")]
    if why := draft_problem(folder):
        return [("from_draft", f"{short_text(folder, 300)} {why}")]
    if spec is None or not target_ok or not (Path(job.target) / "config.json").is_file() \
            or (Path(job.out) / STATE).is_file():
        return []
    if target := target_plan_problems(job):   # the target's own fault is said as the target's, not the draft's
        return target
    from draftsmith.assembler.assemble import plan_assembly
    from draftsmith.assembler.explain import quiet_notes
    from draftsmith.components.backends import eager

    try:   # its notes unsaid (the run's own load says them); the attention backend aside, as validate plans it
        with quiet_notes():
            plan_assembly(for_training(spec), Path(job.target), folder, backend=eager)
    except DraftsmithError as e:
        notes = "".join(f"\n{n}" for n in getattr(e, "__notes__", ()))   # e.g. "are the folders swapped?"
        return [("from_draft", f"{short_text(folder, 300)} is not a draft spec {spec.name} loads onto the target "
                               f"{short_text(job.target, 300)}: {e}{notes}\ngive a draft of spec {spec.name} for "
                               "this target (draftsmith validate checks a pair), or no --from-draft for a fresh "
                               "one")]
    return []


def fresh(job) -> bool:
    """Whether the run starts a fresh draft (init_draft): no --from-draft, no run in --out to resume."""
    return not job.eval_only and not job.from_draft and not (Path(job.out) / STATE).is_file()


def fresh_problems(job, spec) -> list[tuple[str, str]]:
    """A spec whose fresh draft train cannot make (MLA attention, an MTP fusion, FP8 weights...): refused here,
    naming what it asks for and what train makes, not after the run has written its start."""
    if not fresh(job) or not (bad := unsupported(spec)):
        return []
    return [("spec", f"{spec.name}: train cannot make a fresh draft with {', '.join(bad)}; it makes {MAKES}")]


def target_size(job, key: str) -> int | None:
    """An integer of the target's config (``vocab_size``, ``num_hidden_layers``; a text_config's for a multimodal
    one); None when it cannot be read here (a cached target not fetched yet: preflight runs again on its folder)."""
    try:
        cfg = read_config(Path(job.target))
    except (DraftsmithError, OSError):
        return None
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    value = cfg.get(key) or text.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def vocab_problems(job, spec) -> list[tuple[str, str]]:
    """A fresh draft's vocabulary (--draft-vocab) against the spec's ``draft.vocab.reduced``: a spec that says
    false loads no d2t / t2d, one that says true needs them, so a draft of the other kind would be written, then
    refused by its own spec's load after the data was read. ``auto`` takes either; --from-draft and a resumed
    run bring their own vocabulary, and a maker that writes no reduced one (EAGLE-1) takes none. A reduced one
    must hold the spec's decoding.topk tokens at least (:func:`topk_problems`)."""
    reduced, maker = spec.draft.vocab.reduced, MAKERS.get(spec.draft.fusion.kind)
    if not fresh(job) or maker is None or not maker.reduced_vocab:
        return []
    vocab, asked = target_size(job, "vocab_size"), job.draft_vocab or 0
    if reduced is False and asked and vocab is not None and asked < vocab:
        return [("draft_vocab", f"{asked}: spec {spec.name} says draft.vocab.reduced: false (the target's full "
                                "vocabulary, no d2t / t2d): give --draft-vocab 0, or a --spec whose vocab.reduced "
                                "is auto or true")]
    if reduced is True and (not asked or (vocab is not None and asked >= vocab)):
        below = f" below the target's {vocab}" if vocab is not None else ""
        return [("draft_vocab", f"{asked}: spec {spec.name} says draft.vocab.reduced: true (a d2t / t2d map over "
                                f"fewer tokens than the target's): give a --draft-vocab{below}, or a --spec whose "
                                "vocab.reduced is auto or false")]
    return topk_problems(asked, vocab, spec)


def topk_problems(asked: int, vocab: int | None, spec) -> list[tuple[str, str]]:
    """A reduced vocabulary of ``asked`` tokens (0: the target's whole ``vocab``) smaller than the spec's
    decoding.topk: each node of a draft tree takes its topk best candidates from the draft's vocabulary, so such a
    draft was refused by its first plan(), once the data had been read and the vocabulary chosen."""
    topk = spec.decoding.topk
    if not asked or asked >= topk or (vocab is not None and asked >= vocab):
        return []
    return [("draft_vocab", f"{asked}: allowed 0 (the target's whole vocabulary) or at least {topk}, the topk of spec "
                            f"{spec.name} (each draft tree node takes its {topk} best candidates from the draft's "
                            f"vocabulary): give --draft-vocab {topk} or more")]


def planned_taps(job, spec) -> list[int] | None:
    """The taps the run's draft will read, worked out from configs alone so that features of other taps are
    refused before anything slow: the spec's, the target's layer count and the draft's config (the run's in
    --out when resuming, --from-draft's; a fresh draft states the spec's). [] for a fusion without aux_layers
    (EAGLE-1); None when it cannot be told here (a cached target not fetched yet, a fusion no row of
    draft_io.MAKERS makes, a config the draft's load will refuse): the features are compared again with the built
    draft's taps before training. A fresh draft's aux ids that do not fit the target raise a SpecError."""
    if spec.draft.fusion.kind not in MAKERS:
        return None
    if not hasattr(fusion_params(spec), "aux_layers"):
        return []
    if (layers := target_size(job, "num_hidden_layers")) is None:
        return None
    if fresh(job):
        return list(fresh_taps(spec, layers))
    from draftsmith.components.eagle3_config import resolve_taps

    try:
        raw = read_raw_config(Path(job.out) if (Path(job.out) / STATE).is_file() else Path(job.from_draft))
        return list(resolve_taps(fusion_params(spec), raw, layers))
    except (DraftsmithError, OSError, ValueError):
        return None
