"""The optimisation loop: AdamW over the draft only, warm-up + cosine schedule, a rich progress bar with the loss and
each TTT step's top-1 accuracy, and checkpoints that resume to the same weights an uninterrupted run reaches. The
first Ctrl-C finishes the step, saves it and stops (:mod:`draftsmith.train.interrupt`).

A checkpoint is two things in ``out``: the draft itself in the spec's layout (model.safetensors + config.json,
loadable by ``draftsmith.assemble`` at any time) and ``trainer.pt`` (float32 draft state, optimizer state, step),
which is what a resumed run starts from.
"""
from __future__ import annotations

import errno
import math
import pickle
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError

from draftsmith.errors import DraftsmithError, short, short_text
from draftsmith.train.checks import TrainError, check_config
from draftsmith.train.draft_io import export_draft
from draftsmith.train.interrupt import deferred
from draftsmith.train.ttt import ttt_losses

STATE = "trainer.pt"
RESUMABLE = ("steps", "minutes", "save_every")   # the TrainConfig fields a resumed run may change (preflight)


@dataclass
class TrainConfig:
    steps: int = 1000          # optimizer steps in the whole run (the schedule's length)
    batch: int = 4             # windows per step
    lr: float = 1e-3
    ttt: int = 3               # draft steps per window (1 from the target's states + ttt-1 from its own)
    decay: float = 0.8         # weight of TTT step s: decay**s
    seed: int = 0
    save_every: int = 100      # steps between checkpoints
    minutes: float = 0.0       # stop (after a checkpoint) once this much wall time has passed; 0 = no limit
    export_dtype: str = "bfloat16"
    labels: str = "soft"       # "soft": the target's distribution over the kept ids; "hard": its greedy token
    freeze_head: bool = False  # keep the draft's own lm_head at its start (the target's head rows): cheaper steps
    bf16: bool = True          # bfloat16 autocast for the draft's matmuls (fp32 master weights and optimizer)
    init: str = "target"       # a fresh draft's layers: "target" (its last layer: draft_io.start_from_target)
    #                            or "random"

    def __post_init__(self):   # every field in its bounds (checks.CONFIG), else a TrainError naming each one
        check_config(self)


def lr_at(step: int, steps: int, peak: float) -> float:
    """Linear warm-up over the first 5% of the steps, then cosine decay to 10% of the peak."""
    warmup = max(1, steps // 20)
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup))))


def trainable(model, cfg: TrainConfig) -> list[torch.nn.Parameter]:
    model.target.requires_grad_(False)
    model.draft.requires_grad_(True)
    if cfg.freeze_head and hasattr(model.draft, "lm_head"):
        model.draft.lm_head.requires_grad_(False)
    return [p for p in model.draft.parameters() if p.requires_grad]


def optimizer(model, cfg: TrainConfig) -> tuple[list[torch.nn.Parameter], torch.optim.Optimizer]:
    params = trainable(model, cfg)
    return params, torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.0)


def save_start(model, cfg: TrainConfig, out: Path, record: dict | None = None) -> None:
    """Checkpoint a new run's starting draft as step 0, before its features are extracted: an interrupted run is
    then resumed from the start it chose, and an out folder without trainer.pt is never one of ours."""
    save_state(model, optimizer(model, cfg)[1], 0, cfg, Path(out), record)


class SaveFailed(DraftsmithError, OSError):
    """A checkpoint could not be written (a full disk, an I/O error): said naming the folder and the system's
    reason, the last whole checkpoint kept (exit 1), not as draftsmith's internal error."""


def save_state(model, opt, step: int, cfg: TrainConfig, out: Path, record: dict | None = None) -> None:
    """trainer.pt (and the draft beside it). ``record``: the run's own settings a resume must keep
    (resume.run_record: spec, taps, seq, data, features, self-distillation, target), compared by
    resume.resume_problems before a resumed run starts. A write that fails is a :class:`SaveFailed`, its
    temporary files removed; trainer.pt stays as it was (the draft beside it is written first, each file whole:
    where trainer.pt then fails, the draft may be the newer step, and a resume reads trainer.pt's)."""
    tmp = out / (STATE + ".tmp")
    state = {"draft": model.draft.state_dict(), "opt": opt.state_dict(), "step": step, "config": asdict(cfg)}
    try:
        try:
            torch.save({**state, "run": record} if record is not None else state, tmp)
        except RuntimeError as e:   # torch's zip writer after a failed write says "unexpected pos ..." (a full disk)
            raise OSError(" ".join(str(e).split())) from e
        export_draft(model, out, dtype=getattr(torch, cfg.export_dtype), progress=(step, cfg.steps))
        tmp.replace(out / STATE)
    except (OSError, SafetensorError) as e:
        for left in (tmp, out / "config.json.tmp"):
            left.unlink(missing_ok=True)
        why = getattr(e, "strerror", None) or short_text(" ".join(str(e).split()), 200)
        code = getattr(e, "errno", None)
        fix = ("check that it can be written (its permissions, a read-only file system)" if code in REFUSED else
               "free space" if code in FULL or code is None else "mend the cause")   # None: torch's writer, safetensors
        raise SaveFailed(f"cannot write the checkpoint of step {step} into {short_text(out, 300)}: {why}"
                         f"{' (a full disk?)' * (fix == 'free space')}; the last trainer state there (trainer.pt, "
                         f"which a resume reads) is kept: {fix} and run again to resume") from None


FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)   # a write the disk or a quota had no room for
REFUSED = (errno.EACCES, errno.EPERM, errno.EROFS)   # a write the file system does not allow


FRESH = ("give --from-draft with this folder and a new --out to train on from the draft saved beside it with a "
         "fresh optimizer, or a new or empty --out to start fresh")   # a trainer state that cannot be resumed


def load_state(model, opt, path: Path) -> int:
    """Load ``path`` (a :func:`save_state` file) into the draft and ``opt``; return its step. A file that is not
    one, or one of another draft, is a TrainError naming it and saying how to start fresh (nothing is removed)."""
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")   # a state saved on CUDA resumes anywhere
        model.draft.load_state_dict(state["draft"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError(f"step {short(step)} is not an integer >= 0")
    except (pickle.UnpicklingError, EOFError, OSError, RuntimeError, KeyError, IndexError, TypeError, ValueError,
            AttributeError) as e:
        why = short_text(" ".join(str(e).split()), 200)   # load_state_dict's text spans lines
        raise TrainError([("", f"{short_text(path, 300)} is not a trainer state this draft can resume from "
                               f"({type(e).__name__}: {why}); {FRESH}")]) from None
    return step


def train(model, store, out: Path, cfg: TrainConfig, console=None, log=None, record: dict | None = None) -> dict:
    """Train ``model.draft`` on ``store``'s batches; resumes from ``out/trainer.pt`` when present; every
    checkpoint records ``record`` (:func:`save_state`).
    Returns {"step", "loss", "acc"} of the last step run (loss None when the run was already at ``cfg.steps``)."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    out = Path(out)
    params, opt = optimizer(model, cfg)
    model.draft.train()
    start = load_state(model, opt, out / STATE) if (out / STATE).is_file() else 0
    kept = model.draft.kept_ids()
    batches = store.batches(cfg.batch, cfg.seed, start=start)
    t0, last = time.time(), {"step": start, "loss": None, "acc": []}   # loss None: no step was run
    columns = (TextColumn("[bold]train[/bold]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=console is None) as progress, deferred() as stop:
        task = progress.add_task("train", total=cfg.steps, completed=start, info="")
        for step in range(start, cfg.steps):
            for group in opt.param_groups:
                group["lr"] = lr_at(step, cfg.steps, cfg.lr)
            with torch.autocast(kept.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
                loss, acc = ttt_losses(model, next(batches), cfg.ttt, cfg.decay, kept, cfg.labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            last = {"step": step + 1, "loss": loss.item(), "acc": acc}
            info = f"loss {loss.item():.3f}  top-1 per step " + " ".join(f"{a:.2f}" for a in acc)
            progress.update(task, advance=1, info=info)
            if log and (step % 10 == 0 or step + 1 == cfg.steps):
                log(f"step {step + 1}/{cfg.steps} {info} lr {lr_at(step, cfg.steps, cfg.lr):.2e} "
                    f"{time.time() - t0:.0f}s")
            done = step + 1 == cfg.steps
            over = cfg.minutes and time.time() - t0 > cfg.minutes * 60
            if done or over or stop.asked or (step + 1) % cfg.save_every == 0:
                save_state(model, opt, step + 1, cfg, out, record)
            if stop.asked and not done:
                if log:
                    log(f"stopped at step {step + 1}/{cfg.steps} by Ctrl-C, saved; run again to resume")
                raise KeyboardInterrupt
            if over and not done:
                if log:
                    log(f"stopped at step {step + 1}/{cfg.steps} after {cfg.minutes} minutes; run again to resume")
                break
    model.draft.eval()
    return last
