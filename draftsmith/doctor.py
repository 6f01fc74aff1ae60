"""``doctor``: run a target/draft pair on a short probe, measure acceptance per draft position and, when it is low,
try the readings the public formats leave ambiguous, ranked by tau.

The most common failure in the field is silent: a draft loads, but an aux-layer id, a norm flag, the d2t convention,
the rope style or the feedback norm is read the other way, and acceptance falls from ~3 to ~1.1. The readings are
data (:data:`AMBIGUITIES`): a dotted spec path and why it is ambiguous. Their candidate values come from the pydantic
model that checks the field (a Literal's values, both booleans; ``auto`` is not a reading), so a new value is tried
without editing this file, and a field the spec's components do not have is not tried. Each candidate is the spec
with one field changed, validated like a YAML file, assembled and measured on the probe; one that does not assemble
(e.g. ``fc_norm`` without its tensors) is reported with the reason. When the best single change still leaves
acceptance low, a second round tries one more change on top of it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draftsmith.errors import ArgumentError, DraftsmithError, SpecError
from draftsmith.specs.edits import (changed_spec, current_value, field_info, spec_data, unstated_components,
                                    yaml_value)
from draftsmith.specs.schema import Spec

PROBES = (
    "def binary_search(items, target):\n    lo, hi = 0, len(items) - 1\n    while lo <= hi:\n",
    "import os\nimport sys\n\n\ndef main(argv=None):\n    parser = argparse.ArgumentParser(",
)


@dataclass(frozen=True)
class Ambiguity:
    path: str      # dotted spec path; the value set comes from the model that checks it
    why: str


AMBIGUITIES: tuple[Ambiguity, ...] = (
    Ambiguity("draft.fusion.aux_layers.at", "aux-layer ids name layer inputs (HF hidden_states, vLLM) or outputs "
                                            "(SGLang)"),
    Ambiguity("draft.attention.rope", "rotary dimensions paired by halves (neox) or neighbours (interleaved)"),
    Ambiguity("draft.attention.rope_theta", "the draft config's rope_theta, or 10000: EAGLE's and SpecForge's trainers "
                                            "rotate with 10000 whatever the config says"),
    # norm_output before feed_back: where both readings draft alike, the fix names the fusion's own field (what
    # train's export and a speculators config state), not feed_back beside a norm_output that says otherwise
    Ambiguity("draft.fusion.norm_output", "config norm_output means head-only in some engines, fed back in others"),
    Ambiguity("draft.feed_back", "the state fed to the next draft step: before or after the final norm"),
    Ambiguity("draft.fusion.norm_before_residual", "engines disagree on the default"),
    Ambiguity("draft.fusion.fc_norm", "one norm per aux state before fc (EAGLE 3.1)"),
    Ambiguity("draft.fusion.norm_before_fc", "one norm over the concatenated aux states (gpt-oss style)"),
    Ambiguity("draft.vocab.d2t", "d2t holds offsets (target = draft + d2t) or absolute target ids"),
)


@dataclass
class Measure:
    tau: float                      # tokens per target forward (accepted + 1), chain of the spec's steps
    per_position: list[float]       # [i]: share of steps that accepted draft position i + 1
    steps: int                      # verification steps measured
    loss: float | None = None       # teacher-forced draft loss on the same text (nats; lower is better), if measured


@dataclass
class Candidate:
    changes: tuple[tuple[str, Any], ...]
    measure: Measure | None = None
    error: str | None = None        # why it did not assemble or run, in a line
    detail: str | None = field(default=None, repr=False)   # the whole message, with the load's notes
    declared: bool = False          # every change sets its field's declared default
    fault: bool = False             # it failed on a file (unreadable, missing, NaN): no reading changes that

    @property
    def tau(self) -> float:
        return self.measure.tau if self.measure else 0.0

    @property
    def loss(self) -> float | None:
        return self.measure.loss if self.measure else None

    def describe(self) -> str:
        return ", ".join(f"{p} = {yaml_value(v)}" for p, v in self.changes)


@dataclass
class Diagnosis:
    spec: Spec
    base: Candidate                 # the spec as given (changes = ())
    candidates: list[Candidate] = field(default_factory=list)   # best first; those that failed last
    fix: Candidate | None = None    # the best candidate that clearly beats the spec as given
    low: bool = False
    min_tau: float = 2.0            # the bar acceptance was judged by (the asked one, else default_bar's)
    seconds: float = 0.0
    not_applicable: list[str] = field(default_factory=list)     # ambiguities the spec's components do not have


# --- measuring ----------------------------------------------------------------------------------------------------
def measure(model, probes: Sequence[str | Sequence[int]], max_new_tokens: int) -> Measure:
    """Greedy chain of the spec's depth over the probes (stop tokens off): tau and acceptance per position, and
    the draft's teacher-forced loss on each probe and the target's continuation of it."""
    from draftsmith.decoding.arguments import check_call

    steps = model.spec.decoding.steps
    # encoded once, for both; a problem is diagnose()'s, naming its arguments (the command line says its options)
    one = len(probes) == 1   # said as "probe: ...", not "probe 0: ..."
    prompts, _ = check_call(model, probes[0] if one else list(probes), max_new_tokens=max_new_tokens,
                            what="diagnose()", names={"prompt": "probe" if one else "probes"})
    outs = model.generate(prompts, max_new_tokens=max_new_tokens, stop=[], topk=1, steps=steps)
    # each probe's last step, cut by max_new_tokens, is no rejection: measured are the steps nothing cut short
    tau, accepted, whole = outs[0].stats.whole_steps()
    per = [a / whole if whole else 0.0 for a in accepted]
    loss = draft_loss(model, [p + o.token_ids for p, o in zip(prompts, outs)], min(steps, 3))
    return Measure(tau, (per + [0.0] * steps)[:steps], whole, loss)


def draft_loss(model, texts: Sequence[Sequence[int]], steps: int) -> float | None:
    """The draft's training loss on the target's own text: mean over ``steps`` unrolled draft steps (training-time
    test) of the cross-entropy of the target's greedy token, teacher-forced, in nats. Tau counts whole accepted
    tokens, so with a weak draft (tau ~1.5) a misread setting moves it by a token in a hundred; the loss moves
    with every position, which separates readings tau cannot. None where the draft family has no such loss."""
    import torch

    from draftsmith.train.features import target_features
    from draftsmith.train.ttt import ttt_losses

    try:
        total, n = 0.0, 0
        with torch.no_grad():
            for ids in texts:
                if len(ids) <= steps + 1:
                    continue
                batch = target_features(model.target, torch.tensor([list(ids)], device=model.device),
                                        model.draft.taps or ())
                loss, _ = ttt_losses(model, batch, steps, decay=1.0, labels="hard")
                total, n = total + float(loss) / steps, n + 1
        return total / n if n else None
    except Exception:  # noqa: BLE001  a family training does not cover (MTP, MLA drafts): tau alone decides
        return None


def _named(e: BaseException, text: str) -> str:
    """``text`` of ``e``, after its class's name where it is no draftsmith error (whose message says it all, as the
    command line prints it: a CheckpointError names its file)."""
    return text if isinstance(e, DraftsmithError) else f"{type(e).__name__}: {text}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    line = text[0] if text else type(e).__name__
    msg = _named(e, line)
    for more in [t.strip() for t in text[1:] if t.strip()][:2]:   # a problem, then a note with its fix, apart
        msg += (" " if msg.endswith((":", ".")) else "; ") + more
    return msg if len(msg) <= 400 else msg[:397] + "..."


def _whole(e: BaseException) -> str:
    """The error's whole message and the notes the load added to it (folders swapped, sizes that disagree, the
    family the draft is detected as), as the command line prints a failed load."""
    return "\n".join([_named(e, str(e).strip()), *getattr(e, "__notes__", ())])


def file_fault(e: BaseException) -> bool:
    """Whether a load failed on the files themselves (a missing or unreadable file, NaN weights, a bad config
    value): a CheckpointError as such, or a target draftsmith refuses (its type unknown, or its config asking for
    what no target computes: the MXFP4 gpt-oss checkpoint), which no reading of the draft changes. Its subclasses
    (tensors that do not fit the reading, a d2t read in the other convention) and spec errors depend on the
    reading, and the readings are tried."""
    from draftsmith.components.targets import UnsupportedTarget
    from draftsmith.errors import CheckpointError, CheckpointNotFound
    from draftsmith.registry.registry import UnknownComponent

    return (type(e) is CheckpointError or isinstance(e, (CheckpointNotFound, UnsupportedTarget))
            or (isinstance(e, UnknownComponent) and e.kind == "target"))


def unplaced(e: BaseException) -> BaseException:
    """A changed reading's spec problems without the lines of the user's file, which does not hold the change
    (``norm_before_fc: true`` tried beside a stated ``fc_norm: true`` is no problem of the file's fusion line)."""
    if not isinstance(e, SpecError):
        return e
    problems = [dataclasses.replace(p, line=None, column=None) for p in e.problems]
    out = SpecError("the spec read this way", problems)
    for note in getattr(e, "__notes__", ()):   # the load's notes (folders swapped, another target's draft) stay
        out.add_note(note)
    return out


def run_candidate(spec: Spec, changes, target, draft, probes, max_new_tokens, registry, tune=None,
                  **load) -> Candidate:
    from draftsmith.assembler.assemble import assemble
    from draftsmith.assembler.explain import quiet_notes

    cand = Candidate(tuple(changes))
    # the assembler's notes were said once, for the spec as given
    with quiet_notes() if changes else contextlib.nullcontext():
        try:
            s = changed_spec(spec, changes, registry) if changes else spec
            model = assemble(s, target, draft, registry=registry, **load)
            if tune is not None:
                tune(model)
            cand.measure = measure(model, probes, max_new_tokens)
        except ArgumentError:   # the probes or the token count, whatever the reading: the caller's input, said once
            raise
        except Exception as e:  # noqa: BLE001  a candidate that does not assemble is reported, not fatal
            e = unplaced(e) if changes else e
            cand.error, cand.detail = _first_line(e), _whole(e)
            cand.fault = file_fault(e)
    return cand


def diagnose(spec: Spec | str | Path, target: str | Path | None = None, draft: str | Path | None = None, *,
             probes: Sequence[str | Sequence[int]] = PROBES, max_new_tokens: int = 32, min_tau: float | None = None,
             search: bool | None = None, rounds: int = 2, registry=None, dtype: str = "float32",
             device: str = "cpu", ambiguities: Sequence[Ambiguity] = AMBIGUITIES,
             tune: Callable[[Any], None] | None = None) -> Diagnosis:
    """Measure the pair as the spec reads it; when tau < ``min_tau`` (or ``search=True``) try every ambiguous
    reading, one change at a time (a second change on top of the best when that is still low, or, with
    ``search=True``, whatever its tau: two settings read wrong are then both found in one run). ``tune(model)`` is
    called once, with the spec as given's model before it is measured (``--threads auto`` times its runs there)."""
    from draftsmith import default_registry, load_spec

    check_min_tau(min_tau)
    t0 = time.perf_counter()
    registry = registry or default_registry()
    spec = load_spec(spec, registry)
    if (least := spec.decoding.steps + 2) > max_new_tokens:
        # the first token comes from the prompt's forward; a whole chain step commits steps + 1 more
        raise ArgumentError("diagnose()", [
            f"max_new_tokens is {max_new_tokens}; measuring acceptance over the {spec.decoding.steps}-token chain of "
            f"spec {spec.name!r} needs at least {least} (with fewer no whole step is measured, and tau is low "
            "whatever the draft)"])
    from draftsmith.assembler.folders import checkpoint_dirs
    from draftsmith.assembler.build import attention_name
    from draftsmith.assembler.config import read_config

    target, draft = checkpoint_dirs(spec, target, draft)  # missing or without a config: raise
    read_config(target)   # a target config draftsmith cannot read fails every reading alike: said once, not tried
    draft_raw = read_config(draft)
    auto = attention_name(spec, draft_raw)   # attention auto's params are this kind's (MLA: its rope)
    run = lambda changes, tune=None: run_candidate(spec, changes, target, draft, probes,  # noqa: E731
                                                   max_new_tokens, registry, tune, dtype=dtype, device=device)
    base = run((), tune)
    min_tau = default_bar(spec.decoding.steps) if min_tau is None else min_tau
    low = base.measure is None or base.tau < min_tau
    dx = Diagnosis(spec, base, low=low, min_tau=min_tau)
    # a file the pair cannot be read from fails every reading alike (each a whole load: 16 GB again at 8B)
    if search is False or (search is None and not low) or base.fault:
        dx.seconds = time.perf_counter() - t0
        return dx
    best, tried = base, []
    for _ in range(rounds):
        data = spec_data(changed_spec(spec, best.changes, registry)) if best.changes else spec_data(spec)
        done = {p for p, _ in best.changes}
        for amb in ambiguities:
            if amb.path in done:
                continue
            info = field_info(data, amb.path, registry, auto, draft_raw)   # a reading the config gives is in use
            if info is None:
                if amb.path not in dx.not_applicable and not best.changes:
                    dx.not_applicable.append(amb.path)
                continue
            current = current_value(data, amb.path, info)
            kinds = unstated_components(data, amb.path)   # the component's kind, where the spec leaves it unsaid
            for v in info.values:
                if v != current:
                    tried.append(run((*best.changes, *kinds, (amb.path, v))))
                    tried[-1].declared = (best.declared if best.changes else True) and v == info.declared
        # past the bar (--search goes on), only a clearly higher tau is a second change: a lower loss at a fine tau
        # can be a rescaling of the logits (norm_output: none over a draft trained with head)
        top = next_best(tried, best, by_loss=best is base or best.tau < min_tau)
        if top is None:
            break
        best = top
        if best.tau >= min_tau and search is not True:
            break
    dx.fix = best if best is not base else None
    dx.candidates = sorted(tried, key=lambda c: (c is not dx.fix, rank(c)))  # the fix first, then by rank
    dx.seconds = time.perf_counter() - t0
    return dx


def default_bar(steps: int) -> float:
    """The tau below which acceptance is low when none is asked for, for a chain of ``steps``: 2.0, but no more than
    half the chain's reach past the root (1 + steps / 2): a chain of 1 reaches tau 2 only where every draft is
    accepted, so 2.0 would call any miss low."""
    return min(2.0, 1 + steps / 2)


def min_tau_ok(min_tau: Any) -> bool:
    """A finite number >= 0: NaN compares false, so every tau would read as fine, and a negative bar is no bar."""
    import math

    return (not isinstance(min_tau, bool) and isinstance(min_tau, (int, float)) and math.isfinite(min_tau)
            and min_tau >= 0)


def check_min_tau(min_tau: Any) -> None:
    """An ArgumentError unless :func:`min_tau_ok` (or None: the default bar)."""
    from draftsmith.errors import short

    if min_tau is not None and not min_tau_ok(min_tau):
        raise ArgumentError("diagnose()", [f"min_tau {short(min_tau)}: allowed a finite number >= 0"])


def rank(c: Candidate) -> tuple:
    """Best first: working, higher tau, then readings that are the fields' declared defaults, then lower draft
    loss, then fewer changes."""
    loss = c.loss if c.loss is not None else float("inf")
    return (c.measure is None, -round(c.tau, 6), not c.declared, round(loss, 6), len(c.changes))


def clearly_better(c: Candidate, than: Candidate) -> bool:
    """A tau gain beyond what a short probe tells apart (5% and 0.15 tokens), or any working reading when ``than``
    did not load."""
    if c.measure is None:
        return False
    if than.measure is None:
        return True
    return c.tau >= than.tau * 1.05 and c.tau >= than.tau + 0.15


def clearly_lower_loss(c: Candidate, than: Candidate) -> bool:
    """At a tau no lower, a draft loss lower by 10% and 0.1 nats: how a weak draft's readings separate when its
    tau moves too little to tell them apart. Not when both accept exactly alike at every position: then the
    reading drafted the same tokens throughout, and a lower loss may be a rescaling of the logits alone (no final
    norm before the head), which says nothing about which reading the draft was trained with."""
    return (c.loss is not None and than.loss is not None and c.tau >= than.tau
            and c.loss <= than.loss * 0.9 and c.loss <= than.loss - 0.1
            and (than.measure is None or c.measure.per_position != than.measure.per_position))


def next_best(tried: Sequence[Candidate], best: Candidate, by_loss: bool = True) -> Candidate | None:
    """The candidate that clearly beats ``best``: by tau first; failing that (and ``by_loss``), by draft loss."""
    working = [c for c in tried if c.measure is not None]
    top = min(working, key=rank, default=None)
    if top is not None and clearly_better(top, best):
        return top
    if not by_loss:
        return None
    by_loss = [c for c in working if c.loss is not None and c.tau >= best.tau]
    top = min(by_loss, key=lambda c: (round(c.loss, 6), not c.declared, len(c.changes)), default=None)
    return top if top is not None and clearly_lower_loss(top, best) else None
