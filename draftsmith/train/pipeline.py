"""``draftsmith train`` end to end: data -> reduced vocabulary -> a fresh draft (or a copy of ``from_draft``, or the
one in ``out``, resumed) -> the target's features -> the TTT loop -> held-out acceptance per draft position."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

import draftsmith
from draftsmith import chat, hub
from draftsmith.assembler.assemble import read_tokenizer
from draftsmith.assembler.explain import UNFINISHED, unsaid
from draftsmith.assembler.names import group_names
from draftsmith.options import flag
from draftsmith.errors import count, short_list
from draftsmith.train import data as D
from draftsmith.train.checks import TrainError, check_job
from draftsmith.train.draft_io import export_draft, for_training, init_draft, start_from_target, target_text_keys
from draftsmith.train.export_notes import canonical_kept, draft_config, draft_names, output_ids_note, unstated
from draftsmith.train.evaluate import PLANS, Acceptance, acceptance
from draftsmith.train.features import FeatureStore, extract_with_log, made_for, read_meta
from draftsmith.train.provenance import SOURCE, distill_record, source_problem, target_fingerprint, windows_digest
from draftsmith.train.loop import STATE, TrainConfig, save_start, train
from draftsmith.train.outdir import held, undone_on_failure
from draftsmith.train.data_checks import ids_outside, no_windows, skipped_note
from draftsmith.train.preflight import own_folders, preflight
from draftsmith.train.resume import run_record, same_spec, saved_state


@dataclass
class Job:
    spec: str
    target: Path | None   # None: the spec's checkpoints.target (preflight fills it in)
    out: Path
    data: Sequence[Path] = ()
    held_out: Sequence[Path] = ()
    draft_vocab: int | None = 12288   # None or >= the target's: no reduced vocabulary
    seq: int = 512
    max_windows: int | None = None    # windows whose features are extracted (None: all; 0: only those on disk)
    features: Path | None = None      # default out/features
    from_draft: Path | None = None    # a new run starts from this draft (its weights and vocabulary), not a fresh one
    self_distill: int = 0             # > 0: continue `seq // 4`-token prompts of each document with the target
    prompts_per_doc: int = 1          # self-distillation prompts per document, at line starts j / k of the way in
    distill_batch: int = 16           # prompts per batched target-only decode while self-distilling
    eval_prompts: int = 8
    eval_prompt_tokens: int = 128
    eval_new_tokens: int = 64
    device: str = "cpu"
    eval_only: bool = False           # only evaluate the draft in `out`
    chat: bool = False                # chat records rendered by the target's chat template (else turns joined)
    config: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):   # every number in its bounds (checks.JOB), else a TrainError naming each one
        check_job(self)


def reduced_vocab(ids: torch.Tensor, vocab: int, size: int | None) -> torch.Tensor | None:
    """The ``size`` most frequent target ids of ``ids``, sorted (ties: lower id first); None for the full one."""
    if not size or size >= vocab:
        return None
    counts = torch.bincount(ids, minlength=vocab)
    order = torch.argsort(-counts, stable=True)   # descending count, ascending id among equals
    return order[:size].sort().values


def self_distilled(model, docs: Sequence[str], tokenizer, prompt_tokens: int, new_tokens: int,
                   log: Callable[[str], None], batch: int = 16, per_doc: int = 1) -> list[str]:
    """Prompts of ``prompt_tokens`` tokens continued greedily by the target (the EAGLE-3 recipe's
    self-distillation: the draft learns the target's own outputs), ``batch`` prompts per batched target-only
    decode. ``per_doc`` prompts per document, starting at the line starts j / per_doc of the way in (j = 0: the
    document's start), as held-out prompts start at a line boundary."""
    prompts = [ids for ids in (tokenizer(t, add_special_tokens=False)["input_ids"][:prompt_tokens]
                               for d in docs for t in D.line_offsets(d, per_doc)) if ids]
    out = []
    for i in range(0, len(prompts), batch):
        chunk = prompts[i: i + batch]
        res = model.generate_baseline(chunk, max_new_tokens=new_tokens)
        out += [tokenizer.decode(p + r.token_ids) for p, r in zip(chunk, res)]
        log(f"self-distillation: {len(out)}/{len(prompts)} documents")
    return out


def run(job: Job, console=None, log: Callable[[str], None] = print) -> dict[str, Acceptance]:
    preflight(job)   # job.target None: the spec's checkpoints.target
    if (folder := hub.target_folder(job.target)) != Path(str(job.target)):   # a cached name: fetched once, and
        job.target = folder                                                   # its folder checked as any other
        preflight(job)
    with held(Path(job.out)):   # one run at a time on an --out (a second is refused, naming it)
        return run_held(job, console, log)


def run_held(job: Job, console, log: Callable[[str], None]) -> dict[str, Acceptance]:
    out = Path(job.out)
    tok = read_tokenizer(Path(job.target))   # a CheckpointError names a tokenizer file transformers cannot read
    render = chat_render(job, tok)
    # the held-out records, read when acceptance is measured after training: their problems said before it, with
    # the data's (each file's first)
    held = D.expand(job.held_out, skip=own_folders(job))
    held_bad = [("held_out", why) for _, why in D.record_problems(held, render)]
    if job.eval_only:
        if held_bad:
            raise TrainError(held_bad)
        for note in (other_spec_note(job), other_chat_note(job)):
            if note:
                log(note)
        return evaluate(job, tok, log)
    files = D.expand(job.data, skip=own_folders(job))   # the run's own files are no data
    skipped, textless = [], []
    try:
        docs = D.read_documents(files, skipped, textless, render)
    except TrainError as e:
        raise TrainError(e.problems + held_bad) from None
    if held_bad:
        raise TrainError(held_bad)
    if (why := no_held_prompts(job, tok, render)) is not None:   # found before training, not after it
        raise TrainError([("held_out", why)])
    ids = D.encode(docs, tok, tok.eos_token_id) if docs else torch.zeros(0, dtype=torch.long)
    if (outside := ids_outside(job, ids)) is not None:   # the target's embedding would index past its table
        raise outside
    if not docs or (len(ids) < job.seq and not job.self_distill and job.max_windows != 0):
        # before the draft is built (self-distilled text below)
        raise no_windows(job, files, docs, ids, skipped, textless)
    log(f"data: {len(docs)} documents, {len(ids)} tokens{skipped_note(skipped, textless)}")
    feats, fingerprint = Path(job.features or out / "features"), target_fingerprint(Path(job.target))
    distill = distill_record(ids, job.config.seed, job.self_distill, job.prompts_per_doc) if job.self_distill else None
    wins = source_check(job, feats, ids, distill)   # features of other windows: refused before the draft is built
    fresh = not (out / STATE).is_file()
    with undone_on_failure(out, fresh):   # a fresh start refused after self-distillation leaves no draft to resume
        if fresh:
            model = start_fresh(job, ids, log)
        else:
            with unsaid(UNFINISHED):   # "saved at step N of M: run again to resume" is what this run does
                model = draftsmith.assemble(for_training(job.spec), target=job.target, draft=out)
            log(f"resuming the draft in {out}" + (" (--from-draft starts a new run only)" if job.from_draft else "")
                + resume_note(job, model))
        model.target.to(job.device)
        model.draft.to(job.device)
        model.device = job.device
        if job.self_distill and job.max_windows != 0:   # --max-windows 0 trains on the features on disk alone
            docs = self_distilled(model, docs, tok, job.seq // 4, job.self_distill, log, batch=job.distill_batch,
                                  per_doc=job.prompts_per_doc)
            ids = D.encode(docs, tok, tok.eos_token_id)
            if (outside := ids_outside(job, ids, "the self-distilled text")) is not None:
                raise outside
            wins = source_check(job, feats, ids, None)   # the last word (an older features.json records no distill)
        if job.max_windows != 0 and not len(wins):   # inside: a fresh start refused here leaves nothing to resume
            raise no_windows(job, files, docs, ids)
    record = run_record(job, model.spec, model.draft.taps or ())
    if job.max_windows != 0:
        try:
            n = extract_with_log(model, wins, feats, log, limit=job.max_windows, bf16=job.config.bf16,
                                 target=fingerprint, distill=distill)
        except KeyboardInterrupt:   # said as the training loop says its own stop: what is kept, and how to go on
            if fresh:
                where = f"is not trained yet (step 0 of {job.config.steps})"
            else:   # a resumed run's steps are kept
                step = (saved_state(out) or {}).get("step")
                where = "stays as it was" if step is None else f"stays at step {step} of {job.config.steps}"
            log(f"stopped by Ctrl-C while extracting features into {feats} (the shards written are kept); the draft "
                f"in {out} {where}: run again to resume")
            raise
        log(f"features: {n} windows of {job.seq} tokens in {feats}")
    store = FeatureStore(feats)
    if bad := store_problems(store, model, job, fingerprint):
        raise TrainError(bad)
    log(labels_note(store, model, out, job.config.ttt))
    if not SOURCE.keys() & store.meta.keys():
        log(f"features: {feats} does not record the target and windows they were made from (an older draftsmith "
            "wrote them), so they are used unchecked")
    elif isinstance(store.meta.get("target"), dict) and "content" not in store.meta["target"]:
        log(f"features: {feats} records the target's weight files by name and size only (an older draftsmith "
            "wrote them), so a retrained target of the same shapes is not told apart")
    last = train(model, store, out, job.config, console=console, log=log, record=record)
    if last["loss"] is None:   # not one step was run
        log(f"{job.out} is already at step {last['step']} of --steps {job.config.steps}: nothing to train (a larger "
            "--steps trains on, the schedule stretched to it)")
    else:
        log(f"trained to step {last['step']}: loss {last['loss']:.3f}")
    for note in end_notes(model, out, job.spec):
        log(note)
    return evaluate(job, tok, log)


def end_notes(model, out: Path, spec_name: str) -> list[str]:
    """The notes of a finished run about the draft it wrote in ``out`` (export_notes), its config.json and its
    safetensors header read once each."""
    config, listed = draft_config(out), draft_names(out)
    notes = (unstated(model, out, spec_name, config, listed), output_ids_note(model, out, spec_name, config),
             canonical_kept(model, out, listed))
    return [note for note in notes if note]


def source_check(job: Job, feats: Path, ids: torch.Tensor, distill: dict | None) -> torch.Tensor | None:
    """The windows of ``ids`` this run extracts (None with --max-windows 0, or before self-distillation), once the
    features folder is found to be of them: a TrainError when it records other windows or, before a
    self-distillation (``distill``: its :func:`distill_record`), another one. So a run that would mix other
    windows in is refused before the draft is built and the decode runs."""
    if job.max_windows == 0:
        return None
    meta = read_meta(feats)
    if distill is not None:
        if bad := source_problem(feats, meta, {"distill": distill}):
            raise TrainError([bad])
        return None
    wins = D.windows(ids, job.seq, seed=job.config.seed)
    if bad := source_problem(feats, meta, {"windows": windows_digest(wins)}):
        raise TrainError([bad])
    return wins


def store_problems(store: FeatureStore, model, job: Job, fingerprint: dict) -> list[tuple[str, str]]:
    """The features training is about to read, against the draft as built and this run (whether extracted now
    or, with --max-windows 0, only read): the draft's taps, windows long enough for --ttt, the target and
    --bf16 they were made with. preflight checked what it could without the draft; this is the last word."""
    meta, found = store.meta, []
    if bad := made_for(store.folder, meta, {"taps": list(model.draft.taps or ()), "seq": job.seq}):
        found.append(("features", bad))
    if meta["seq"] < job.config.ttt + 1:
        found.append(("ttt", f"{job.config.ttt}: the features in {store.folder} are of {meta['seq']}-token windows, "
                             f"which allow --ttt {meta['seq'] - 1} at most (a window holds ttt + 1 tokens)"))
    if bad := source_problem(store.folder, meta, {"target": fingerprint, "bf16": job.config.bf16}):
        found.append(bad)
    return found


def labels_note(store: FeatureStore, model, out: Path, ttt: int | None = None) -> str:
    """What share of the positions the loss reads it counts (the target's next token in the draft vocabulary; each
    position as often as the ``ttt`` unrolled steps read it); none is a TrainError before the first step: every
    step would log loss 0.000 and train nothing."""
    kept = model.draft.kept_ids()
    counted, total = store.labels_in(kept, ttt)
    if not counted:
        raise TrainError([("", f"none of the {total} target next tokens in the features in {store.folder} is in the "
                               f"draft's vocabulary of {len(kept)} ids, so the loss would count no position; "
                               f"{out} holds that draft untrained: give a new --out with a draft whose vocabulary "
                               "covers the data (--from-draft), or none (--draft-vocab takes the data's most frequent "
                               "tokens)")])
    return (f"labels: {counted} of {total} positions ({counted / total:.1%}) have the target's next token in the draft "
            "vocabulary; the loss counts those")


def resume_note(job: Job, model) -> str:
    """What a resumed run says beside 'resuming': that --draft-vocab does not apply when it asks for another
    vocabulary than the draft has (only a fresh draft reads it, as --init), and that an older trainer.pt
    records none of the run's own settings, so that their changes cannot be told."""
    note = ""
    if (saved := saved_state(Path(job.out))) is not None and saved["run"] is None:
        note += (f"; {Path(job.out) / STATE} does not record the run's settings (an older draftsmith wrote it), so "
                 "a change of --spec, --seq, --data, --features, --self-distill or --target cannot be told: give "
                 "those the run was started with")
    V, has = int(model.draft.target_vocab), len(model.draft.kept_ids())
    asked = job.draft_vocab if job.draft_vocab and job.draft_vocab < V else V
    if asked != has:
        note += f"; it keeps its {has}-token vocabulary (--draft-vocab applies to a fresh draft only)"
    return note


def start_fresh(job: Job, ids: torch.Tensor, log: Callable[[str], None]):
    """:func:`start` and its step-0 checkpoint (inside :func:`run`'s ``undone_on_failure``: when either fails, or
    is interrupted, what they wrote to job.out is removed again, so that the next run is not refused for an --out
    holding a draft without trainer.pt)."""
    model = start(job, ids, log)
    save_start(model, job.config, Path(job.out), run_record(job, model.spec, model.draft.taps or ()))
    return model


def start(job: Job, ids: torch.Tensor, log: Callable[[str], None]):
    """A new run's draft, written to job.out: a copy of job.from_draft, or a fresh one whose vocabulary is the
    job.draft_vocab most frequent target tokens of ``ids`` (the data), started as job.config.init says."""
    out = Path(job.out)
    if job.from_draft:
        # fits the spec, or refused
        model = draftsmith.assemble(for_training(job.spec), target=job.target, draft=job.from_draft)
        export_draft(model, out, dtype=torch.float32, source=Path(job.from_draft))   # any format in, the spec's out
        log(f"start: the draft in {job.from_draft} (its own vocabulary and weights: --draft-vocab and --init do "
            "not apply)")
        return model
    V = target_text_keys(job.target)["vocab_size"]
    shares_head = draftsmith.load_spec(job.spec).draft.share.lm_head == "target"   # EAGLE-1: the target's head
    kept = None if shares_head else reduced_vocab(ids, V, job.draft_vocab)
    if shares_head:
        log(f"draft vocabulary: the target's full {V} tokens (the spec shares the target's head: --draft-vocab "
            "does not apply)")
    elif kept is not None:
        share = torch.bincount(ids, minlength=V)[kept].sum().item() / len(ids)
        log(f"draft vocabulary: the {len(kept)} most frequent target tokens, {share:.2%} of the data")
    else:
        asked = f" (--draft-vocab {job.draft_vocab} is not below it)" if job.draft_vocab else ""
        log(f"draft vocabulary: the target's full {V} tokens{asked}")
    model = init_draft(job.spec, job.target, out, kept, seed=job.config.seed)
    if job.config.init == "target":
        done, left = start_from_target(model)
        log(f"start: {len(done)} draft weights from the target's last layer" + (
            f"; {len(left)} keep their fresh start, no weight of that layer having their name and a shape they take "
            f"({short_list([pattern for pattern, _ in group_names(left)], 4, 300)})" if left else ""))
    return model


def other_spec_note(job: Job) -> str | None:
    """--eval-only measures the draft as --spec reads it; a note when trainer.pt records another spec (by what
    shapes the draft: resume.spec_digest), as acceptance under another reading is not the trained draft's."""
    saved = saved_state(Path(job.out))
    run = saved.get("run") if saved else None
    if not isinstance(run, dict) or run.get("spec") is None:
        return None
    spec = draftsmith.load_spec(job.spec)
    if same_spec(run, spec):
        return None
    trained = (f"another spec named {spec.name!r} (it reads the draft otherwise)" if run["spec"] == spec.name
               else f"spec {run['spec']!r}")
    given = f" (--spec {run['spec_given']})" if run.get("spec_given") else ""
    return (f"note: the draft in {job.out} was trained with {trained}; it is measured here as spec {spec.name!r} "
            f"reads it: give the --spec it was trained with{given} to measure it as trained")


def other_chat_note(job: Job) -> str | None:
    """--eval-only renders chat records as --chat says; a note when trainer.pt records the other setting (held-out
    chats are then read otherwise than the draft was trained on)."""
    saved = saved_state(Path(job.out))
    run = saved.get("run") if saved else None
    if not isinstance(run, dict) or not isinstance(run.get("chat"), bool) or run["chat"] == job.chat:
        return None
    trained = flag("chat", run["chat"])
    return (f"note: the draft in {job.out} was trained with {trained}; its held-out chat records are read here with "
            f"{flag('chat', job.chat)}: give {trained} to measure it as trained")


def chat_render(job: Job, tok) -> D.Render | None:
    """--chat: a chat record's turns -> the text the target's chat template writes for them (draftsmith.chat); a
    TrainError when the tokenizer has none (preflight checks the folder's files first)."""
    if not job.chat:
        return None
    if (why := chat.template_problem(tok, job.target)) is not None:
        raise TrainError([("chat", why.replace("pass text or token ids instead", "drop --chat"))])
    return lambda turns: chat.render(tok, turns, answer=False)


def prompt_room(files: Sequence[Path]) -> str:
    """Where a held-out file must hold a prompt's tokens and its new ones, as :func:`D.held_out_prompts` takes
    them, for the kinds among ``files``: a text file past its first third, a JSONL or JSON file in one record, from
    the record's start."""
    records = {f.suffix in D.RECORD_SUFFIXES for f in files}
    if records == {True}:
        return "in one record (a JSONL or JSON file's prompts start at a record's start)"
    if records == {False}:
        return "past its first third (a text file's prompt starts there)"
    return "past its first third (a text file) or in one record, from its start (a JSONL or JSON file)"


def no_held_prompts(job: Job, tok, render: D.Render | None) -> str | None:
    """Why the held-out files give no prompt to measure acceptance on after training (each too short), or None."""
    if not job.held_out or not job.eval_prompts:
        return None
    files = D.expand(job.held_out, skip=own_folders(job))
    if D.held_out_prompts(files, tok, job.eval_prompts, job.eval_prompt_tokens, seed=job.config.seed, render=render):
        return None
    return (f"gives no prompt to measure acceptance on after training: none of its {count(files, 'file')} has "
            f"{job.eval_prompt_tokens + 64} tokens {prompt_room(files)}; give a longer one, or --eval-prompts 0 to "
            "measure none")


def evaluate(job: Job, tok, log: Callable[[str], None] = print) -> dict[str, Acceptance]:
    """Held-out acceptance of the draft saved in ``job.out`` (loaded again, as a user would); with no held-out text
    given, said so (--eval-prompts asks for prompts of it)."""
    if not job.held_out and job.eval_prompts:
        log("held-out: none given (--eval PATH, or --stdlib), so acceptance is not measured")
    if not job.held_out or not job.eval_prompts:
        return {}
    files = D.expand(job.held_out, skip=own_folders(job))
    prompts = D.held_out_prompts(files, tok, job.eval_prompts, job.eval_prompt_tokens, seed=job.config.seed,
                                 render=chat_render(job, tok))
    if not prompts:
        why = (f"held-out: none of the {len(files)} files has {job.eval_prompt_tokens + 64} tokens "
               f"{prompt_room(files)}, so no prompt to measure acceptance on")
        if job.eval_only:
            raise TrainError([("", why)])
        log(why)
        return {}
    if len(prompts) < job.eval_prompts:   # fewer text files or records that long than prompts asked for
        log(f"held-out: {count(prompts, 'prompt')} of the {job.eval_prompts} asked for (--eval-prompts): a text file "
            f"gives one, if it has {job.eval_prompt_tokens + 64} tokens past its first third, and a JSONL or JSON file "
            f"one per record that long; the {count(files, 'held-out file')} gave {len(prompts)}")
    model = draftsmith.assemble(job.spec, target=job.target, draft=job.out, device=job.device)
    results = {}
    for name, plan in PLANS.items():
        results[name] = acceptance(model, prompts, max_new_tokens=job.eval_new_tokens, **plan)
        log(f"held-out ({count(prompts, 'prompt')}, {job.eval_new_tokens} new tokens) {name}: "
            f"{results[name].line()}")
    return results
