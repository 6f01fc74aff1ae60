"""What a training run accepts: :class:`TrainError` and the bounds of every :class:`~draftsmith.train.TrainConfig`
and :class:`~draftsmith.train.Job` number, checked when either is built, so a bad value is refused before the
target is fetched, the data read or a feature extracted (``pipeline.preflight`` checks the paths)."""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable

from draftsmith import limits
from draftsmith.errors import DraftsmithError, short

INITS = ("target", "random")   # how a fresh draft's layers start (draft_io.init_draft)
LABELS = ("soft", "hard")      # ttt.ttt_losses


class TrainError(DraftsmithError, ValueError):
    """Input a training run cannot use: an option, the data, the out or features folder. ``problems`` are
    (field, text) pairs, field being the Job / TrainConfig field the text is about ('' for none): str() names
    the fields, :meth:`render` lets the command line name its options instead."""

    def __init__(self, problems: Iterable[tuple[str, str]]):
        self.problems = list(problems)
        super().__init__(self.render())

    def render(self, option: Callable[[str], str] = str, prefix: str = "") -> str:
        """The problems, one after another, each after ``prefix`` (the command line's ``error: ``)."""
        return "\n".join(prefix + (named(option(name), text) if name else text) for name, text in self.problems)


def named(option: str, text: str) -> str:
    """A problem's text after its option's name, unless it starts with that option as given: a flag's value is its
    spelling (--chat, --no-chat), so "--chat --no-chat: ..." would name the option twice."""
    given = option.startswith("--") and text.startswith((f"{option}:", f"--no-{option[2:]}:"))
    return text if given else f"{option} {text}"


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def at_least(low: int, why: str = "") -> tuple[Callable, str]:
    return (lambda v: _int(v) and v >= low), f"an integer >= {low}{why}"


def at_most(high: int, why: str = "") -> tuple[Callable, str]:   # for a field its CONFIG rule found an integer
    return (lambda v: v <= high), f"at most {high}{why}"


def optional(rule: tuple[Callable, str]) -> tuple[Callable, str]:   # None: the field's default behaviour
    ok, allowed = rule
    return (lambda v: v is None or ok(v)), allowed


def one_of(values: tuple[str, ...]) -> tuple[Callable, str]:
    return (lambda v: v in values), " or ".join(map(repr, values))


CONFIG = {  # TrainConfig field -> (test, what is allowed)
    "steps": at_least(1), "batch": at_least(1), "ttt": at_least(1), "save_every": at_least(1),
    "lr": ((lambda v: _num(v) and 0 < v < math.inf), "a finite number > 0"),
    "decay": ((lambda v: _num(v) and 0 < v < math.inf), "a finite number > 0"),
    "minutes": ((lambda v: _num(v) and v >= 0), "a number >= 0 (0: no limit)"),
    "seed": ((lambda v: _int(v) and 0 <= v < 2**32), "an integer from 0 to 2**32 - 1"),
    "labels": one_of(LABELS), "init": one_of(INITS),
}
CEILINGS = {  # TrainConfig field -> (test, what is allowed), for a value its CONFIG rule accepted
    "steps": at_most(limits.TRAIN_STEPS, " (about twelve days at ten steps a second; the warm-up is 5% of the "
                                "steps, so a longer schedule trains at a learning rate near 0 for as long as it runs)"),
}
JOB = {  # Job field -> (test, what is allowed); seq's lower bound depends on ttt (job_problems)
    "draft_vocab": optional(at_least(0, " (0: the target's full vocabulary)")),
    "max_windows": optional(at_least(0, " (0: only the features already on disk)")),
    "self_distill": at_least(0, " (0: no self-distillation)"), "prompts_per_doc": at_least(1),
    "distill_batch": at_least(1), "eval_prompts": at_least(0), "eval_prompt_tokens": at_least(1),
    "eval_new_tokens": at_least(1),
}


def problems(obj, rules: dict[str, tuple[Callable, str]]) -> list[tuple[str, str]]:
    """(field, "VALUE: allowed ...") for each field of ``obj`` its rule refuses."""
    return [(name, f"{short(getattr(obj, name))}: allowed {allowed}")
            for name, (ok, allowed) in rules.items() if not ok(getattr(obj, name))]


def check_config(cfg) -> None:
    found = problems(cfg, CONFIG)
    found += problems(cfg, {k: rule for k, rule in CEILINGS.items() if k not in dict(found)})
    if found:
        raise TrainError(found)


PATH_LISTS = ("data", "held_out")   # Job fields that take a list of paths


def path_list_problems(job) -> list[tuple[str, str]]:
    """A Job field of :data:`PATH_LISTS` given one path (a str or a Path) where a list of them is expected: read as
    a sequence, a str would be taken for as many one-character paths ('g', 'o', 'o', 'd', ...)."""
    found = []
    for name in PATH_LISTS:
        if isinstance(v := getattr(job, name), (str, bytes, os.PathLike)):
            path = short(os.fspath(v) if isinstance(v, os.PathLike) else v)
            found.append((name, f"takes a list of paths, got the {type(v).__name__} {path}; write {name}=[{path}]"))
    return found


def check_job(job) -> None:
    """The job's numbers; a window holds ttt + 1 tokens at least (each TTT step predicts one token further),
    and 4 when self-distilling (its prompts are seq // 4 tokens)."""
    low = max(job.config.ttt + 1, 4 if job.self_distill else 2)
    why = f" (ttt + 1{', and 4 to self-distill' if job.self_distill else ''})"
    if found := problems(job, {**JOB, "seq": at_least(low, why)}) + path_list_problems(job):
        raise TrainError(found)
