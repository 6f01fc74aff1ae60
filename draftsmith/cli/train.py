"""``draftsmith train``: train the draft a spec declares against a target folder."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from draftsmith.cli.app import app, err, out


@app.command()
def train(
    out_dir: str = typer.Option(..., "--out", help="the draft folder: written in the spec's layout, resumed if "
                                                    "it holds trainer.pt; else it must be new or empty (or hold "
                                                    "only the features folder)"),
    spec: str = typer.Option("eagle3-llama", help="built-in spec name or YAML path (EAGLE-3 or EAGLE-1)"),
    target: Optional[str] = typer.Option(None, help="Hugging Face target folder, or 'smollm2' (also "
                                                    "'cache:smollm2') for the cached SmolLM2-135M-Instruct "
                                                    "(fetched once); default: the spec's checkpoints.target"),
    data: Optional[List[str]] = typer.Option(None, help="text / JSONL / JSON files or folders (repeatable)"),
    held_out: Optional[List[str]] = typer.Option(None, "--eval", help="held-out files or folders (repeatable)"),
    stdlib: bool = typer.Option(False, help="add this Python's standard library minus its test folders to the "
                                            "training data (with --data: both) and its test folders to the "
                                            "held-out text (with --eval: both)"),
    steps: int = typer.Option(1000, help="optimizer steps in the whole run (the schedule's length; at most "
                                         "10000000)"),
    batch: int = typer.Option(4, help="windows per step"),
    seq: int = typer.Option(512, help="tokens per window"),
    lr: float = typer.Option(1e-3, help="AdamW learning rate"),
    ttt: int = typer.Option(3, help="training-time-test steps (the draft feeds itself ttt-1 times)"),
    draft_vocab: int = typer.Option(12288, help="reduced vocabulary size (0 = the target's full vocabulary; else "
                                                "at least the spec's decoding.topk)"),
    max_windows: Optional[int] = typer.Option(None, help="windows to extract target features for (default all; "
                                                          "0 = use only the features already on disk)"),
    features: Optional[str] = typer.Option(None, help="feature cache folder (default OUT/features)"),
    from_draft: Optional[str] = typer.Option(None, help="start a new run from this draft folder's weights and "
                                                         "vocabulary (copied to --out; --draft-vocab and --init do "
                                                         "not apply), not a fresh draft"),
    self_distill: int = typer.Option(0, help="> 0: train on the target's own greedy continuations of this many "
                                             "tokens (from seq/4-token prompts of each document)"),
    prompts_per_doc: int = typer.Option(1, help="self-distillation prompts per document, at line starts j/k of "
                                                "the way in (1: the document's start)"),
    distill_batch: int = typer.Option(16, help="prompts per batched target-only decode while self-distilling"),
    labels: str = typer.Option("soft", help="soft: the target's distribution over the draft vocabulary; hard: its "
                                            "greedy token (cheaper)"),
    freeze_head: bool = typer.Option(False, help="keep the draft's lm_head at the target's head rows (cheaper)"),
    bf16: bool = typer.Option(True, help="bfloat16 autocast for matmuls (fp32 weights and optimizer state)"),
    init: str = typer.Option("target", help="a fresh draft's layers: 'target' starts them from the target's last "
                                            "layer (reading the deepest tap), 'random' from N(0, 0.02)"),
    save_every: int = typer.Option(100, help="steps between checkpoints"),
    minutes: float = typer.Option(0.0, help="stop after a checkpoint once this many minutes passed (0 = no limit)"),
    eval_prompts: int = typer.Option(8, help="held-out prompts to decode after training"),
    eval_only: bool = typer.Option(False, help="only measure held-out acceptance of the draft in --out"),
    chat: bool = typer.Option(False, help="render chat records (messages, ShareGPT conversations) with the "
                              "target's chat template, as an instruct model sees them (else their turns joined)"),
    seed: int = typer.Option(0, help="seed of the draft's initial weights, the training windows and their order"),
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N"),
    threads: int = typer.Option(1, help="CPU threads for torch"),
) -> None:
    """Train a draft: reduced vocabulary from the data's token counts, TTT unroll, resumable checkpoints, and
    held-out acceptance per draft position at the end."""
    from draftsmith import hub
    from draftsmith.train import Job, TrainConfig, run
    from draftsmith.train.checks import TrainError

    early = machine_problems(threads)   # reported with the rest, before the data is read
    given = dict(out=out_dir, target=target, data=data, held_out=held_out, features=features, from_draft=from_draft)
    if empty := empty_paths(given):   # typer's Path("") would be the current folder, which nobody named
        from draftsmith.train.target_checks import device_problems

        said = TrainError(early + device_problems(device) + empty)
        err.print(said.render(option, "error: "), style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    paths, held = [Path(p) for p in data or []], [Path(p) for p in held_out or []]
    if stdlib:
        from draftsmith.train import data as D

        paths, held = paths + D.stdlib_files(), held + D.stdlib_files(held_out=True)
    try:   # the config's, the job's and the paths' checks, before the target is fetched or the data read
        job = checked_job(
            TrainConfig, dict(steps=steps, batch=batch, lr=lr, ttt=ttt, seed=seed, save_every=save_every,
                              minutes=minutes, labels=labels, freeze_head=freeze_head, bf16=bf16, init=init),
            Job, dict(spec=spec, target=None if target is None else Path(target), out=Path(out_dir), data=paths,
                      held_out=held, draft_vocab=draft_vocab or None, seq=seq, max_windows=max_windows,
                      features=_path(features), from_draft=_path(from_draft), self_distill=self_distill,
                      prompts_per_doc=prompts_per_doc, distill_batch=distill_batch, eval_prompts=eval_prompts,
                      device=device, eval_only=eval_only, chat=chat), found=early)
        # the option as typed (a Path drops ./: ``./smollm2`` is a folder, ``smollm2`` the cached target)
        job.target = hub.target_folder(target if target is not None else job.target, console=err)
        run(job, console=out, log=lambda m: out.print(m, style="dim", markup=False))   # it prints the results
    except TrainError as e:   # a bad option, data or folder: named as the option it came from
        err.print(e.render(option, "error: "), style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2)


def empty_paths(given: dict) -> list[tuple[str, str]]:
    """The path options given as an empty string (a list option: any of its values), as TrainError problems."""
    fix = "not a path: give one (./ names the current folder)"
    return [(name, f"is an empty string, {fix}" if value == "" else f"is given an empty string, {fix}")
            for name, value in given.items() if value == "" or (isinstance(value, list) and "" in value)]


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def checked_job(config, config_kw: dict, job, job_kw: dict, found: list | None = None):
    """``job(**job_kw, config=config(**config_kw))`` once every check before the target is fetched passed: the
    numbers' bounds (each class refuses its own when built) and preflight's, reported together in one TrainError
    (a refused number is left at its default for preflight, which then judges the rest)."""
    from draftsmith.train.checks import TrainError
    from draftsmith.train.preflight import preflight

    found = list(found or ())

    def build(cls, kw: dict, **more):
        try:
            return cls(**kw, **more)
        except TrainError as e:
            found.extend(e.problems)
            refused = {name for name, _ in e.problems}
            return cls(**{k: v for k, v in kw.items() if k not in refused}, **more)

    built = build(job, job_kw, config=build(config, config_kw))
    try:
        preflight(built, refused=bool(found))   # also the spec's checkpoints.target when --target is not given
    except TrainError as e:
        found.extend(e.problems)
    if found:
        raise TrainError(found)
    return built


def machine_problems(threads: int) -> list[tuple[str, str]]:
    """--threads as a TrainError problem (and the threads set when fine), reported with the other options' problems,
    exit 2 (--device is preflight's: 'cuda' without CUDA is said there, not found once the target is loaded)."""
    import torch

    from draftsmith.errors import OptionError
    from draftsmith.options import check_threads

    found = []
    try:
        torch.set_num_threads(check_threads(threads))
    except OptionError as e:
        found.append(("", str(e)))
    return found   # --device: preflight's, as the Python API's Job is checked (said once)


def option(field: str) -> str:
    """The command-line option of a Job / TrainConfig field."""
    return "--" + {"held_out": "eval"}.get(field, field).replace("_", "-")
