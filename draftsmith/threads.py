"""``--threads auto``: the CPU thread count a call decodes fastest with, measured on that call.

Which count is fastest depends on the machine more than on the model: on the AVX-512 machines the demo's numbers
come from, one thread decodes SmolLM2 fastest (a hand-off between threads costs more than it saves on matmuls
this small); on a shared 2-core AVX2 EPYC two threads were faster in most runs, one in the rest (README,
**Threads**). So ``generate`` and ``bench`` time a few short runs at 1, 2, 4 and 8 threads (up to the CPUs this
process may use) and keep the fastest::

    choice = auto_threads(lambda: model.generate(prompt, max_new_tokens=8), "cpu")   # left set in torch
    print(choice.said("the speculative run"))                                        # the times it chose by
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import torch

MOST = 8        # the probe's largest count: past it, a model small enough to decode on a CPU gains nothing
MARGIN = 0.05   # more threads must be this much faster: runs on a shared machine move by a few percent
CLOCK = time.perf_counter   # the probes' clock, unless a call passes its own


def said(threads: int) -> str:
    """'1 thread', '2 threads'."""
    return f"{threads} thread{'s' * (threads != 1)}"


@dataclass(frozen=True)
class ThreadChoice:
    threads: int                 # the count chosen (and set)
    seconds: dict[int, float]    # count -> the fastest of its timed runs (empty: nothing was timed)
    why: str = "one count"       # why nothing was timed, when nothing was

    def reason(self) -> str:
        """'2 threads: 0.41 s, 1 thread 0.52 s' (the chosen count first, then the others fastest first)."""
        if self.threads not in self.seconds:
            return f"{said(self.threads)}, nothing timed ({self.why})"
        others = sorted((n for n in self.seconds if n != self.threads), key=self.seconds.__getitem__)
        rest = "".join(f", {said(n)} {self.seconds[n]:.2f} s" for n in others)
        return f"{said(self.threads)}: {self.seconds[self.threads]:.2f} s{rest}"

    def said(self, what: str) -> str:
        """The choice for a line of output: the times, and how they were taken (``what``: the run timed)."""
        how = f": the fastest of {what} timed at each count" if self.seconds else ""
        return f"{self.reason()} (--threads auto{how})"


def counts(cpus: int | None = None) -> list[int]:
    """The counts to try: 1, 2, 4, 8 up to ``cpus`` (default: the CPUs this process may run on), and ``cpus``
    itself when it is below 8 and not a power of two (3 CPUs: 1, 2, 3)."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    tried = [n for n in (1, 2, 4, MOST) if n <= cpus]
    return tried + [cpus] if cpus < MOST and cpus not in tried else tried


def fastest_threads(run: Callable[[], object], choices: Sequence[int], rounds: int = 2,
                    clock: Callable[[], float] | None = None) -> ThreadChoice:
    """Times ``run()`` at each count in ``choices``, ``rounds`` times interleaved (a load that comes and goes
    meets every count alike), sets torch to the fewest threads whose fastest run is within MARGIN of the fastest
    count's, and returns that choice. ``run`` should be warm already (first-use costs would land on the first
    count); one count is set without timing anything."""
    if not choices or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in choices):
        raise ValueError(f"choices must be thread counts >= 1, got {list(choices)!r}")
    ordered, clock = sorted(set(choices)), clock or CLOCK
    seconds: dict[int, float] = {}
    chosen = ordered[0]
    if len(ordered) > 1:
        for r in range(rounds):
            turn = r % len(ordered)
            for n in ordered[turn:] + ordered[:turn]:   # each round starts one count later
                torch.set_num_threads(n)
                start = clock()
                run()
                seconds[n] = min(seconds.get(n, float("inf")), clock() - start)
    if seconds:   # (rounds=0 times nothing: the fewest threads, as for one count)
        best = min(seconds.values())
        chosen = next(n for n in ordered if seconds[n] <= best * (1 + MARGIN))
    torch.set_num_threads(chosen)
    return ThreadChoice(chosen, seconds)


def auto_threads(run: Callable[[], object], device: str | torch.device) -> ThreadChoice:
    """``--threads auto`` for a call on ``device``: on the CPU, ``run()`` once untimed (its first-use costs), then
    :func:`fastest_threads` over :func:`counts` (one CPU: 1, nothing run); on an accelerator 1 thread, nothing
    run (the host only launches its kernels)."""
    kind = torch.device(device).type
    if kind != "cpu":
        return replace(fastest_threads(run, [1]), why=f"on {kind} the host only launches kernels")
    choices = counts()
    if len(choices) == 1:
        return replace(fastest_threads(run, choices), why="one CPU")
    run()
    return fastest_threads(run, choices)
