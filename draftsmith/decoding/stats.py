"""Per-run statistics and outputs."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Stats:
    """What a generate() call measured, summed over its batch. Read first: :attr:`acceptance_length` (tau) and
    :attr:`tokens_per_second` (properties: not in the repr; :meth:`as_dict` has them). ``accepted_per_position[i]``
    counts the steps that accepted at least i+1 drafts (divided by ``steps``: the share of steps reaching draft
    position i+1, cumulative, not the rate at i+1 given i)."""
    mode: str = "baseline"
    new_tokens: int = 0
    target_forwards: int = 0          # verification / decode forwards run (prefill not counted; on CUDA a step
    draft_forwards: int = 0           # launched ahead of a stop token too); every draft forward run, prefill's included
    steps: int = 0                    # verification (or decode) steps summed over sequences
    committed: int = 0                # tokens committed by those steps (accepted + 1 each)
    accepted_per_position: list[int] = field(default_factory=list)   # [i]: steps that accepted >= i+1 drafts;
    #                                     one entry per draft position (zeros included), empty for target-only
    cut: list[int] = field(default_factory=list)   # what each step cut short by max_new_tokens or a stop token
    #                                     emitted of its accepted drafts (at most one per sequence: the cut ends it)
    wall_seconds: float = 0.0
    prefill_seconds: float = 0.0      # of wall_seconds: the prompt's forward(s) up to the first token (on the host)
    forward_seconds: float = 0.0      # host time inside model forwards (on CUDA: launching them, or graph replays)
    addressing_seconds: float = 0.0   # of forward_seconds: the KV pool's addressing and attention masks (fixed_kv)
    draft_seconds: float = 0.0        # of forward_seconds: the draft's forwards (the rest is the target's)
    # of forward_seconds / addressing_seconds / draft_seconds: the prefill's forwards (target and draft), set by
    # end_prefill
    prefill_forward_seconds: float = 0.0
    prefill_addressing_seconds: float = 0.0
    prefill_draft_seconds: float = 0.0

    def end_prefill(self, seconds: float) -> None:
        """The prefill took ``seconds`` (the prompt's forwards and the first token on the host): record it, and the
        forward and addressing totals so far as the prefill's, so the decode-only shares leave them out."""
        self.prefill_seconds = seconds
        self.prefill_forward_seconds, self.prefill_addressing_seconds = self.forward_seconds, self.addressing_seconds
        self.prefill_draft_seconds = self.draft_seconds

    @property
    def acceptance_length(self) -> float:
        """tau: tokens committed per target verification (accepted + 1, averaged over steps)."""
        return (self.committed / self.steps) if self.steps else 1.0

    @property
    def tokens_per_second(self) -> float:
        """New tokens per second of the whole call, the prefill included (:attr:`decode_tokens_per_second`: after
        it)."""
        return self.new_tokens / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        """Tokens after each row's first (those the steps committed), per second after the prefill: the decoding
        rate, whatever the prompt's length and the batch's size."""
        rest = self.wall_seconds - self.prefill_seconds
        return self.committed / rest if rest > 0 and self.committed > 0 else 0.0

    @property
    def bookkeeping_share(self) -> float:
        """Share of the whole run's wall time (the prefill included) spent outside model forwards; the benchmarks
        report :attr:`decode_bookkeeping_share`, which the prefill does not dilute."""
        return 1.0 - self.forward_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def addressing_share(self) -> float:
        """Share of the whole run's wall time (the prefill included) the forwards spent on the KV pool's
        addressing and masks; the benchmarks report :attr:`decode_addressing_share`."""
        return self.addressing_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def decode_bookkeeping_share(self) -> float | None:
        """Share of the decoding's wall time (after the prefill) spent outside model forwards: tree building,
        verification, compaction, the step's host sync and emission, the loop. (wall - prefill - (forward -
        prefill's forwards)) / (wall - prefill). Meaningful where a forward's host time is its compute time (the
        CPU): on CUDA it is launch time, and with whole-step CUDA graphs the runners' timers run only in the
        prefill and while a step is captured. None where no step decoded (max_new_tokens 1: the prefill's token
        alone), which has no decoding time to share."""
        if not self.steps:
            return None
        rest = self.wall_seconds - self.prefill_seconds
        return 1.0 - (self.forward_seconds - self.prefill_forward_seconds) / rest if rest > 0 else 0.0

    @property
    def decode_addressing_share(self) -> float | None:
        """Share of the decoding's wall time (after the prefill) the forwards spent on the KV pool's addressing and
        masks (fixed_kv): a part of the forward time, so not in :attr:`decode_bookkeeping_share`; no layer's work,
        so bookkeeping too in the issue's sense of everything but the model's compute. None where no step decoded."""
        if not self.steps:
            return None
        rest = self.wall_seconds - self.prefill_seconds
        return (self.addressing_seconds - self.prefill_addressing_seconds) / rest if rest > 0 else 0.0

    def record_step(self, accepted: int, cut: bool = False) -> None:
        # accepted: draft tokens of this step that were emitted (a step cut by max_new_tokens or a stop token
        # counts only what it emitted, so committed sums to the tokens generated: invariant 12); cut: it emitted
        # fewer than the target accepted (kept in `cut`, which whole_steps leaves out)
        if cut:
            self.cut.append(accepted)
        self.steps += 1
        self.committed += accepted + 1
        if len(self.accepted_per_position) < accepted:
            self.accepted_per_position += [0] * (accepted - len(self.accepted_per_position))
        for i in range(accepted):
            self.accepted_per_position[i] += 1

    def whole_steps(self) -> tuple[float, list[int], int]:
        """(tau, accepted per position, steps) over the steps nothing cut short: the draft's acceptance, which a
        step cut at the end of a generation (one token of budget left after a chain the target took whole) would
        understate; tau 1.0 where no step was whole."""
        steps = self.steps - len(self.cut)
        committed = self.committed - sum(a + 1 for a in self.cut)
        per = [n - sum(a > i for a in self.cut) for i, n in enumerate(self.accepted_per_position)]
        return (committed / steps if steps else 1.0), per, steps

    def as_dict(self) -> dict:
        return {"mode": self.mode, "acceptance_length": round(self.acceptance_length, 3),
                "new_tokens": self.new_tokens, "target_forwards": self.target_forwards,
                "draft_forwards": self.draft_forwards, "steps": self.steps, "committed": self.committed,
                "accepted_per_position": self.accepted_per_position,
                "tokens_per_second": round(self.tokens_per_second, 2),
                "decode_tokens_per_second": round(self.decode_tokens_per_second, 2),
                "wall_seconds": round(self.wall_seconds, 4),
                "prefill_seconds": round(self.prefill_seconds, 4), "forward_seconds": round(self.forward_seconds, 4),
                "draft_seconds": round(self.draft_seconds, 4), "bookkeeping_share": round(self.bookkeeping_share, 3),
                "addressing_share": round(self.addressing_share, 3)}


@dataclass(frozen=True)
class StepCost:
    """A speculative run's decoding step in target-only decode steps (the same prompt and length, one process):
    ``step`` is the tau at which it breaks even (each target-only step commits one token a row, each speculative
    step tau); ``verify``, ``draft`` and ``rest`` split it into the target's verification forward, the draft's
    forwards (expansions and catch-up) and everything else (tree, verdict, compaction, the loop), or are None where
    the forwards' host time is not their cost (CUDA: the timers see launches, and none under whole-step graphs)."""

    step: float
    verify: float | None
    draft: float | None
    rest: float | None

    def said(self, tau: float) -> str:
        """The step, its parts and the tau it needs, beside a run's ``tau`` (what generate and bench print)."""
        parts = "" if self.verify is None else \
            f" (verification {self.verify:.2f}, draft forwards {self.draft:.2f}, the rest {self.rest:.2f})"
        return (f"a step cost {self.step:.2f} target-only decode steps{parts}: faster than target-only where tau > "
                f"{self.step:.2f} (this run: {tau:.2f})")


def step_cost(run: Stats, baseline: Stats, timed: bool = True) -> StepCost | None:
    """``run``'s decoding step (after its prefill) over ``baseline``'s (target-only); None when either made no
    decoding step. ``timed``: the runners' timers measured the forwards' work (the CPU; False on CUDA)."""
    if run.target_forwards == 0 or baseline.target_forwards == 0:
        return None
    unit = (baseline.wall_seconds - baseline.prefill_seconds) / baseline.target_forwards    # s per target-only step
    if unit <= 0:
        return None
    per_step = (run.wall_seconds - run.prefill_seconds) / run.target_forwards / unit
    if not timed:
        return StepCost(per_step, None, None, None)
    draft = (run.draft_seconds - run.prefill_draft_seconds) / run.target_forwards / unit
    verify = (run.forward_seconds - run.prefill_forward_seconds) / run.target_forwards / unit - draft
    return StepCost(per_step, verify, draft, per_step - verify - draft)


@dataclass
class Output:
    token_ids: list[int]
    text: str | None
    stats: Stats
