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

import copy
import contextlib
import time
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from draftsmith.errors import ArgumentError
from draftsmith.specs.resolve import SECTIONS, dig, reserved
from draftsmith.specs.schema import Ref, Spec

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
    Ambiguity("draft.feed_back", "the state fed to the next draft step: before or after the final norm"),
    Ambiguity("draft.fusion.norm_before_residual", "engines disagree on the default"),
    Ambiguity("draft.fusion.fc_norm", "one norm per aux state before fc (EAGLE 3.1)"),
    Ambiguity("draft.fusion.norm_before_fc", "one norm over the concatenated aux states (gpt-oss style)"),
    Ambiguity("draft.fusion.norm_output", "config norm_output means head-only in some engines, fed back in others"),
    Ambiguity("draft.vocab.d2t", "d2t holds offsets (target = draft + d2t) or absolute target ids"),
)
# which registry kind a component reference at a spec path names (its params model holds the field)
REF_KINDS = {s.path: s.kind for s in SECTIONS if s.key == "kind"}   # draft.layer -> layer, ...


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
    error: str | None = None        # why it did not assemble or run
    declared: bool = False          # every change sets its field's declared default

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
    min_tau: float = 2.0
    seconds: float = 0.0
    not_applicable: list[str] = field(default_factory=list)     # ambiguities the spec's components do not have


# --- values of a field, from the models that check it ------------------------------------------------------------
def _flat(ann: Any) -> list[Any]:
    # Union / Optional / Annotated -> their members
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _flat(typing.get_args(ann)[0])
    if origin is typing.Union or isinstance(ann, types.UnionType):
        return [m for a in typing.get_args(ann) for m in _flat(a)]
    return [ann]


def _leaf_values(ann: Any) -> list[Any]:
    values: list[Any] = []
    for member in _flat(ann):
        if member is bool:
            values += [False, True]
        elif typing.get_origin(member) is typing.Literal:
            values += [v for v in typing.get_args(member) if v != "auto"]
    return list(dict.fromkeys(values))


@dataclass(frozen=True)
class Field:
    values: tuple[Any, ...]         # the readings to try (``auto`` excluded)
    default: Any                    # the reading used when the spec does not state it; None: read from the config
    declared: Any = None            # the model's declared default (breaks ties between equally good readings)


def field_info(data: Mapping[str, Any], path: str, registry, auto_attention: str | None = None) -> Field | None:
    """What a dotted spec path can hold for this spec (``data``: the spec as plain data), from the pydantic model
    that checks it (the spec schema, or the params model of the component the spec names); None when the spec's
    components have no such field. ``auto_attention``: the kind ``attention: {kind: auto}`` is for the draft at
    hand (:func:`draftsmith.assembler.build.attention_name`; None: gqa, the reading without a draft)."""
    model: Any = Spec
    parts = path.split(".")
    for i, name in enumerate(parts):
        if isinstance(model, type) and issubclass(model, Ref):      # {kind: NAME, ...params}: NAME's params model
            here = ".".join(parts[:i])
            kind, ref = REF_KINDS.get(here), dig(data, here)
            comp_name = ref.get("kind") if isinstance(ref, Mapping) else None
            if kind is None or not isinstance(comp_name, str):
                return None
            if choice_of := reserved(kind).get(comp_name):   # the kind this draft gets (gqa without a draft)
                comp_name = auto_attention or choice_of.choices[0]
            comp = registry.components.get((kind, comp_name))
            if comp is None:
                return None
            model = comp.record.params
        info = model.model_fields.get(name) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if info is None:
            return None
        if i == len(parts) - 1:
            values = _leaf_values(info.annotation)
            members = _flat(info.annotation)
            # a field that may say auto (or None) is read from the draft config when unstated: no known default
            auto = type(None) in members or any(typing.get_origin(m) is typing.Literal and "auto" in
                                                typing.get_args(m) for m in members)
            declared = None if info.is_required() else info.default
            return Field(tuple(values), None if auto else declared, declared) if values else None
        model = next((m for m in _flat(info.annotation) if isinstance(m, type) and issubclass(m, BaseModel)), None)
    return None


def current_value(data: Mapping[str, Any], path: str, info: Field) -> Any:
    """The reading the spec uses now: the stated value, else the field's default (None: unknown)."""
    value = dig(data, path)
    return value if value is not None else info.default


def with_change(data: Mapping[str, Any], path: str, value: Any) -> dict:
    """A deep copy of ``data`` with ``path`` set; a non-mapping on the way (``aux_layers: auto``) becomes {}."""
    out = copy.deepcopy(dict(data))
    node = out
    *parents, leaf = path.split(".")
    for part in parents:
        if not isinstance(node.get(part), Mapping):
            node[part] = {}
        node[part] = dict(node[part])
        node = node[part]
    node[leaf] = value
    return out


def spec_data(spec: Spec) -> dict:
    return spec.model_dump(mode="json", exclude_unset=True)


def changed_spec(spec: Spec, changes: Sequence[tuple[str, Any]], registry) -> Spec:
    """The spec with ``changes`` applied, validated as a YAML file would be; relative paths keep their base."""
    from draftsmith.specs.loader import parse_spec

    data = spec_data(spec)
    for path, value in changes:
        data = with_change(data, path, value)
    out = parse_spec(data, source=spec.source, registry=registry)
    out._source = spec._source
    return out


def yaml_value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def yaml_snippet(changes: Sequence[tuple[str, Any]]) -> str:
    import yaml

    data: dict = {}
    for path, value in changes:
        data = with_change(data, path, value)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip()


# --- measuring ----------------------------------------------------------------------------------------------------
def measure(model, probes: Sequence[str | Sequence[int]], max_new_tokens: int) -> Measure:
    """Greedy chain of the spec's depth over the probes (stop tokens off): tau and acceptance per position, and
    the draft's teacher-forced loss on each probe and the target's continuation of it."""
    from draftsmith.decoding.arguments import check_call

    steps = model.spec.decoding.steps
    prompts, _ = check_call(model, list(probes), max_new_tokens=max_new_tokens)   # encoded once, for both
    outs = model.generate(prompts, max_new_tokens=max_new_tokens, stop=[], topk=1, steps=steps)
    st = outs[0].stats
    per = [a / st.steps if st.steps else 0.0 for a in st.accepted_per_position]
    loss = draft_loss(model, [p + o.token_ids for p, o in zip(prompts, outs)], min(steps, 3))
    return Measure(st.acceptance_length, (per + [0.0] * steps)[:steps], st.steps, loss)


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


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    line = text[0] if text else type(e).__name__
    more = " ".join(t.strip() for t in text[1:3])
    msg = f"{type(e).__name__}: {line}" + (f" {more}" if more else "")
    return msg if len(msg) <= 240 else msg[:237] + "..."


def run_candidate(spec: Spec, changes, target, draft, probes, max_new_tokens, registry, **load) -> Candidate:
    from draftsmith.assembler.assemble import assemble, quiet_notes

    cand = Candidate(tuple(changes))
    # the assembler's notes were said once, for the spec as given
    with quiet_notes() if changes else contextlib.nullcontext():
        try:
            s = changed_spec(spec, changes, registry) if changes else spec
            cand.measure = measure(assemble(s, target, draft, registry=registry, **load), probes, max_new_tokens)
        except ArgumentError:   # the probes or the token count, whatever the reading: the caller's input, said once
            raise
        except Exception as e:  # noqa: BLE001  a candidate that does not assemble is reported, not fatal
            cand.error = _first_line(e)
    return cand


def diagnose(spec: Spec | str | Path, target: str | Path | None = None, draft: str | Path | None = None, *,
             probes: Sequence[str | Sequence[int]] = PROBES, max_new_tokens: int = 32, min_tau: float = 2.0,
             search: bool | None = None, rounds: int = 2, registry=None, dtype: str = "float32",
             device: str = "cpu", ambiguities: Sequence[Ambiguity] = AMBIGUITIES) -> Diagnosis:
    """Measure the pair as the spec reads it; when tau < ``min_tau`` (or ``search=True``) try every ambiguous
    reading, one change at a time (a second change on top of the best when that is still low)."""
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
    from draftsmith.assembler.assemble import checkpoint_dir
    from draftsmith.assembler.build import attention_name
    from draftsmith.assembler.config import read_config

    target, draft = checkpoint_dir(spec, target, "target"), checkpoint_dir(spec, draft, "draft")  # missing: raise
    auto = attention_name(spec, read_config(draft))   # attention auto's params are this kind's (MLA: its rope)
    run = lambda changes: run_candidate(spec, changes, target, draft, probes, max_new_tokens, registry,  # noqa: E731
                                        dtype=dtype, device=device)
    base = run(())
    low = base.measure is None or base.tau < min_tau
    dx = Diagnosis(spec, base, low=low, min_tau=min_tau)
    if search is False or (search is None and not low):
        dx.seconds = time.perf_counter() - t0
        return dx
    best, tried = base, []
    for _ in range(rounds):
        data = spec_data(changed_spec(spec, best.changes, registry)) if best.changes else spec_data(spec)
        done = {p for p, _ in best.changes}
        for amb in ambiguities:
            if amb.path in done:
                continue
            info = field_info(data, amb.path, registry, auto)
            if info is None:
                if amb.path not in dx.not_applicable and not best.changes:
                    dx.not_applicable.append(amb.path)
                continue
            current = current_value(data, amb.path, info)
            for v in info.values:
                if v != current:
                    tried.append(run((*best.changes, (amb.path, v))))
                    tried[-1].declared = (best.declared if best.changes else True) and v == info.declared
        top = next_best(tried, best)
        if top is None:
            break
        best = top
        if best.tau >= min_tau:
            break
    dx.fix = best if best is not base else None
    dx.candidates = sorted(tried, key=lambda c: (c is not dx.fix, rank(c)))  # the fix first, then by rank
    dx.seconds = time.perf_counter() - t0
    return dx


def min_tau_ok(min_tau: Any) -> bool:
    """A finite number >= 0: NaN compares false, so every tau would read as fine, and a negative bar is no bar."""
    import math

    return (not isinstance(min_tau, bool) and isinstance(min_tau, (int, float)) and math.isfinite(min_tau)
            and min_tau >= 0)


def check_min_tau(min_tau: Any) -> None:
    """An ArgumentError unless :func:`min_tau_ok`."""
    from draftsmith.errors import short

    if not min_tau_ok(min_tau):
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


def next_best(tried: Sequence[Candidate], best: Candidate) -> Candidate | None:
    """The candidate that clearly beats ``best``: by tau first; failing that, by draft loss."""
    working = [c for c in tried if c.measure is not None]
    top = min(working, key=rank, default=None)
    if top is not None and clearly_better(top, best):
        return top
    by_loss = [c for c in working if c.loss is not None and c.tau >= best.tau]
    top = min(by_loss, key=lambda c: (round(c.loss, 6), not c.declared, len(c.changes)), default=None)
    return top if top is not None and clearly_lower_loss(top, best) else None
