"""What a failed load is told beside its error: notes computed only when a draftsmith error is raised (a folder
that holds the other role's checkpoint, a draft made for another target, a layer count; the notes naming the spec
field a misfit comes from are :mod:`draftsmith.assembler.field_notes`), a draft config problem that does not hide
the tensors', and the assembler's notes silenced where they are no news."""
from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from draftsmith.assembler.build import held_layers
from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.assembler.config import (ConfigReading, draft_error, flatten_draft_config, read_raw_config,
                                        unread_sizes, written_key)
from draftsmith.assembler.detect import draft_in, row_settings, swap_note
from draftsmith.assembler.names import chain_note, one_pattern
from draftsmith.components.weights import RuleSet
from draftsmith.errors import DraftsmithError, short, short_text
from draftsmith.registry import Registry, default_registry
from draftsmith.registry.results import ComponentFailed
from draftsmith.specs.resolve import dig
from draftsmith.specs.schema import Spec


@contextlib.contextmanager
def explained(*notes: Callable[[], str | None]):
    """A draftsmith error raised inside gets each of ``notes`` that has something to say (computed only then); a
    component's own failure (ComponentFailed: a plugin's factory or method raised) gets none: it is that code's,
    and a note such as "detected as eagle3-llama ... without --spec" would send the user off the plugin's spec."""
    try:
        yield
    except ComponentFailed:
        raise
    except DraftsmithError as e:
        for note in notes:
            try:
                text = note()
            except DraftsmithError:   # an unreadable folder: the error itself says so
                text = None
            if text:
                e.add_note(text)
        raise


@contextlib.contextmanager
def checked_along(reading: ConfigReading):
    """A draft config problem does not hide the tensors' (each run reports all it can): when no expected tensor
    depends on its keys (they were left out, taking their defaults: config_values.SHAPELESS), the draft is built and
    checked inside the block anyway, its load notes unsaid (they would speak of the keys left out), and what that
    finds is added to the config error as a note before it is raised; when the expected tensors depend on them, the
    error says that the tensor checks follow once they are fixed."""
    error = reading.error
    if error is None:
        yield
        return
    if reading.shaping:
        one = len(reading.shaping) == 1
        error.add_note(f"note: the tensor checks follow once {', '.join(reading.shaping)} {'is' if one else 'are'} "
                       f"fixed: the draft's expected tensors depend on {'it' if one else 'them'}")
        raise error
    aside = f"{', '.join(reading.aside)} left at {'its default' if len(reading.aside) == 1 else 'their defaults'}"
    with checked_too(error, aside):
        yield


@contextlib.contextmanager
def set_aside(spec, problems, draft_raw=None):
    """The spec problems the draft's build set aside (``build_draft(defer=True)``: values no tensor's shape depends
    on, such as EAGLE-3 tap ids out of range), raised once the block has checked the tensors (each was said only
    once the other was fixed); those all of what the draft's config states (``draft_raw``) name its file."""
    if not problems:
        yield
        return
    with checked_too(draft_error(spec, draft_raw, list(problems)), "the problems above set aside"):
        yield


@contextlib.contextmanager
def checked_too(error: DraftsmithError, aside: str):
    """``error`` raised after the block, which checks the tensors with the problem ``aside`` (its load notes unsaid:
    they would speak of it), and what that found added as a note: each run reports all it can."""
    try:
        with quiet_notes():
            yield
    except DraftsmithError as e:
        notes = "".join(f"\n{n}" for n in getattr(e, "__notes__", ()))
        error.add_note(f"note: the tensors were checked too ({aside}): {e}{notes}")
        raise error from None
    error.add_note(f"note: the tensors were checked too ({aside}): they fit")
    raise error


@contextlib.contextmanager
def unsaid(kind: str):
    """The assembler's notes of one kind (a record's ``NOTE_KIND``) unsaid inside the block: a resumed training run
    loads the draft it continues, whose "saved at step N of M: run the training again to resume" (``UNFINISHED``)
    is what the run is doing."""
    log = logging.getLogger("draftsmith")

    def keep(record: logging.LogRecord) -> bool:
        return getattr(record, NOTE_KIND, None) != kind

    log.addFilter(keep)
    try:
        yield
    finally:
        log.removeFilter(keep)


NOTE_KIND, UNFINISHED = "draftsmith_note", "unfinished_training"   # a note's kind, on its log record


@contextlib.contextmanager
def quiet_notes():
    """The assembler's notes (the "draftsmith" logger's warnings) unsaid inside the block, for loads whose notes are
    no news to the user (doctor's readings of a spec already loaded once; convert's stand-in target)."""
    log = logging.getLogger("draftsmith")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def folder_swap_note(folder: str | Path, role: str, registry: Registry | None = None,
                     names: list[str] | None = None) -> str | None:
    """The note for a ``role`` ("target" or "draft") folder that holds the other role's kind of checkpoint
    (detect.swap_note), read from the folder; ``names``: its tensor names when they were listed already. None
    when the folder cannot be read: whatever reads it next says why."""
    try:
        return swap_note(registry or default_registry(), folder, read_raw_config(folder),
                         names or list(list_tensors(folder)), role)
    except DraftsmithError:
        return None


_LAYER = re.compile(r"^layers\.\d+\.")


def unchained_layers_note(spec: Spec, rules: RuleSet, names, canonical: list[str]) -> Callable[[], str | None]:
    """The note for ``num_layers: auto`` that finds no layer because the rules were written as steps: a later
    rule would have made a name an earlier one made into a 'layers.N.' name (the load plan says the same of the
    names a model lacks, :func:`draftsmith.assembler.plan.chain_note`)."""
    def note() -> str | None:
        if spec.draft.num_layers != "auto" or any(_LAYER.match(c) for c in canonical):
            return None
        mapped = ((source, canon, index) for source in names for canon, index in [rules.to_canonical(source)]
                  if canon is not None)   # the ignored left out
        return chain_note(rules, mapped, lambda name: _LAYER.match(name) is not None)
    return note


def held_names(rules: RuleSet, names) -> list[str]:
    """The canonical names the checkpoint's tensors land on, every part of a tensor a split rule splits included
    (RuleSet.to_parts: its later parts may name another layer, or q/k/v's biases beyond q's), the ignored left out.

    Where none is a 'layers.N.' name, a tensor's first part only: build's account of a ``num_layers: auto`` that
    finds no layer counts the names weights.ignore dropped as the listing less this list, one name per checkpoint
    name (a split's other parts, all of them no layer's, would be counted as fewer dropped)."""
    mapped = [parts for n in names if (parts := rules.to_parts(n)[0]) is not None]
    held = [c for parts in mapped for c in parts]
    return held if any(_LAYER.match(c) for c in held) else [parts[0] for parts in mapped]


def swapped_note(registry: Registry, folder: Path, role: str,
                 names: list[str] | None = None) -> Callable[[], str | None]:
    return lambda: folder_swap_note(folder, role, registry, names)


class DetectedNote:
    """The note for a draft that does not fit a registered spec (named as is, not a YAML file of the user's own)
    where a detector recognises the folder as another spec, or as this spec's family in a variant whose settings
    (detect.Family.settings) the spec does not hold: what ``inspect`` proposes, and how to load with it. None for
    the spec's own draft (``shipped``: its checkpoints.draft), which the spec is made for whatever it is detected
    as (smollm2's is an eagle3-llama draft): what does not fit is the target. A spec file of the user's own is told
    it, its own checkpoints.draft too, where the draft is detected as a spec of another fusion kind
    (:func:`other_fusion`: an EAGLE-1 draft under an EAGLE-3 spec). The folder's config is read as written (a
    detector asks for a params.json's own keys: dim, n_layers), and only when the note is asked for, once.
    :meth:`elsewhere`: whether it names another spec (then a note advising a field of this one is no help:
    :func:`unless`)."""

    def __init__(self, registry: Registry, spec: Spec, folder: Path, names: list[str], *, shipped: bool = False):
        self.registry, self.spec, self.folder, self.names, self.shipped = registry, spec, folder, names, shipped
        self.found: tuple[str | None, bool] | None = None

    def __call__(self) -> str | None:
        if self.found is None:
            self.found = self.find()
        return self.found[0]

    def elsewhere(self) -> bool:
        try:
            self()
        except DraftsmithError:   # an unreadable folder: the error itself says so
            return False
        return self.found[1]   # (None, False) where there is no note

    def find(self) -> tuple[str | None, bool]:
        """(the note, whether it names another spec)."""
        spec, registry, folder, names = self.spec, self.registry, self.folder, self.names
        try:
            stock = Path(registry.spec_source(spec.name).path).resolve() == Path(str(spec.source)).resolve()
        except DraftsmithError:
            stock = False
        if stock and self.shipped:
            return None, False
        draft_raw = read_raw_config(folder)
        match = draft_in(registry, draft_raw, names)
        if match is None or not (stock or other_fusion(registry, spec, match.spec)):
            return None, False
        data = spec.model_dump(mode="json")
        differ = [(path, value) for path, value in row_settings(match, draft_raw, names)
                  if match.spec != spec.name or dig(data, path) != value]
        if match.spec == spec.name and not differ:
            return None, False
        settings = ", ".join(f"{path.removeprefix('draft.')}: {str(v).lower() if isinstance(v, bool) else v}"
                             for path, v in differ)
        where = short_text(folder, 300)
        return (f"note: {where} is detected as {match.spec} ({short_text(match.reason, 300)})"
                f"{f', with {settings}' if settings else ''}: `draftsmith inspect {where}` writes that spec, and "
                f"`draftsmith generate --draft {where}` without --spec uses it"), match.spec != spec.name


def other_fusion(registry: Registry, spec: Spec, detected: str) -> bool:
    """Whether the spec ``detected`` names drafts of another fusion kind than ``spec`` (an EAGLE-1 draft under a
    user's EAGLE-3 spec file): that draft is no variant the user's own file may be written for, so it is told
    what the draft is, as a registered spec is. False where that spec does not load, and where either kind is a
    plugin's (a fusion of its own name may read the detected family's drafts: an EAGLE-3 variant)."""
    from draftsmith.hooks.records import BUILTIN
    from draftsmith.specs.loader import load_spec
    try:
        kinds = {load_spec(detected, registry).draft.fusion.kind, spec.draft.fusion.kind}
    except DraftsmithError:
        return False
    return len(kinds) == 2 and all(getattr(registry.components.get(("fusion", k)), "plugin", None) == BUILTIN
                                   for k in kinds)


def unless(other: Callable[[], bool], *notes: Callable[[], str | None]) -> tuple[Callable[[], str | None], ...]:
    """``notes``, each silent where ``other()`` holds (a draft detected as another spec: advice on a field of this
    spec would send the user to edit the wrong one)."""
    return tuple((lambda note=note: None if other() else note()) for note in notes)


def pairing_note(draft_raw: dict, target_cfg: Any) -> Callable[[], str | None]:
    """The note for a draft whose config gives another hidden size or vocabulary than the target's (a hidden size
    its config's ``target_hidden_size`` says is made for this target's width is no sign of another target)."""
    from draftsmith.components.eagle3_config import config_value

    def note() -> str | None:
        made_for = config_value(draft_raw, "target_hidden_size")
        narrow = made_for is not None and made_for == getattr(target_cfg, "hidden_size", None)
        differ = [f"{k} {draft_raw[k]!r} (the target's: {getattr(target_cfg, k, None)!r})" for k in ("hidden_size",
                  "vocab_size") if k in draft_raw and draft_raw[k] != getattr(target_cfg, k, draft_raw[k])
                  and not (k == "hidden_size" and narrow)]
        return (f"note: the draft's config.json says {' and '.join(differ)}: is the draft made for this target?"
                if differ else None)
    return note


def unread_sizes_note(draft_raw: Mapping[str, Any]) -> Callable[[], str | None]:
    """The note for a draft config that leaves intermediate_size or num_key_value_heads to their defaults while it
    holds whole numbers under keys nothing reads (``ffn_dim``, ``n_kv_heads``: another model's names): the shapes
    the load expects come from those defaults (config.unread_sizes, which a config lacking a required size gets)."""
    def note() -> str | None:
        flat = flatten_draft_config(draft_raw)
        left = [written_key(draft_raw)(k) for k in ("intermediate_size", "num_key_value_heads") if flat.get(k) is None]
        said = unread_sizes(flat, draft_raw) if left else ""
        return f"note: the draft's config states no {' or '.join(left)} (a default was taken){said}" if said else None
    return note


TRAIN_STEP, TRAIN_STEPS = "draftsmith.train_step", "draftsmith.train_steps"   # train's checkpoints' metadata


def training_progress(files: Iterable[Path]) -> tuple[int, int] | None:
    """(step, steps) of a draft `draftsmith train` saved before its last step, from its weights' metadata (a run
    stopped by Ctrl-C, --minutes or a failure, or a checkpoint copied mid-run), or None: a finished run's, and any
    other draft."""
    from safetensors import SafetensorError, safe_open

    for file in sorted({f for f in files if f.suffix == ".safetensors"}):
        try:
            with safe_open(str(file), framework="pt") as f:
                meta = f.metadata() or {}
            step, steps = int(meta[TRAIN_STEP]), int(meta[TRAIN_STEPS])
        except (OSError, ValueError, KeyError, SafetensorError):   # no such metadata: not a training checkpoint
            continue
        if step < steps:
            return step, steps
    return None


def training_note(files: Iterable[Path]) -> str | None:
    """What a load of a draft :func:`training_progress` finds unfinished is told, or None."""
    return None if (progress := training_progress(files)) is None else progress_note(*progress)


def progress_note(step: int, steps: int) -> str:
    return (f"it is a training checkpoint saved at step {step} of {steps} (the run stopped early, or was copied "
            "mid-run): its acceptance is not the finished draft's; run the training again to resume")


def vocab_mismatch(draft_raw: dict, target_cfg: Any) -> str | None:
    """What a draft that loads is told when its config gives another vocabulary than the target's: a spec that
    shares the target's embedding and head loads it (it computes on the target's ids), but a draft trained on
    another tokenizer proposes tokens the target rarely accepts. None where the config states no vocab_size."""
    found, want = draft_raw.get("vocab_size"), getattr(target_cfg, "vocab_size", None)
    if found is None or want is None or found == want:
        return None
    return (f"its config.json says vocab_size {found!r}, the target's is {want!r}: is the draft made for this "
            f"target? It loads (it reads the target's ids), but a draft trained on another vocabulary proposes "
            f"tokens the target seldom accepts; the output is the target's either way")


def layers_note(spec: Spec, canonical: list[str], rules: RuleSet, names: Sequence[str]) -> Callable[[], str | None]:
    """The note for a spec whose num_layers differs from the layers the checkpoint holds. None where the weight
    rules map checkpoint names of different layers onto one (the load's collision lines say so): the layers counted
    after such rules are not the checkpoint's, and num_layers: auto would not help. Names of one layer mapped onto
    one (their numbers alike: a rule that lost a group, gate/up/down onto gate_proj) leave the count as it is."""
    def note() -> str | None:
        want = spec.draft.num_layers
        if len(set(canonical)) < len(canonical) and not _within_layers(rules, names):
            return None
        found = held_layers(spec, canonical)
        return None if want in ("auto", found) else (
            f"note: the spec's draft.num_layers is {want}; the checkpoint holds {found} layer{'s' * (found != 1)} "
            f"(layers.0..{found - 1} after the weight rules): set num_layers: auto")
    return note


def _within_layers(rules: RuleSet, names: Sequence[str]) -> bool:
    """Whether every set of checkpoint names the rules map onto one canonical name shares its numbers (one layer's
    tensors, not two layers')."""
    sources: dict[str, list[str]] = {}
    for n in names:
        for c in rules.to_parts(n)[0] or ():
            sources.setdefault(c, []).append(n)
    merged = [srcs for srcs in sources.values() if len(srcs) > 1]
    return all(len({tuple(re.findall(r"\d+", n)) for n in srcs}) == 1 for srcs in merged)


def dropped_rules(spec, registry: Registry, names: Sequence[str]) -> str | None:
    """The note for a spec whose own ``weights.rules`` replaced its base's list (lists are not merged) where a base
    rule it left out matches checkpoint names (``extends: eagle3-llama`` with a rule for 'decoder.': the base's
    '^model\\.' -> '' no longer applies to model.decoder.*); None where it extends nothing, its base cannot be read
    (that is said apart) or nothing it dropped would match."""
    from draftsmith.components.patterns import search
    from draftsmith.specs.extends import base_file
    from draftsmith.specs.loader import load_spec

    if not spec.extends or spec.weights is None:
        return None
    try:
        base = load_spec(base_file(spec, registry), registry)
    except (DraftsmithError, OSError):
        return None
    own = [rule.model_dump() for rule in spec.weights.rules]
    dropped = [(rule, hits) for rule in (r.model_dump() for r in (base.weights.rules if base.weights else ()))
               if rule not in own and isinstance(rule.get("match"), str)
               and (hits := [n for n in names if search(rule["match"], n)])]
    if not dropped:
        return None
    said = "; ".join(f"{_rule_text(rule)} ({one_pattern(hits)})" for rule, hits in dropped[:3])
    return (f"note: this spec's weights.rules replaced the whole list of its base {short_text(spec.extends, 200)} "
            f"(a list is not merged), so the base's rules it leaves out no longer read these names: {said}; restate "
            "those it needs in its own list")


def _rule_text(rule: Mapping[str, Any]) -> str:
    """A rule as plain data, as messages write it: 'match' -> 'replace', or the match of a rule of another kind."""
    replace = f" -> {short(rule['replace'])}" if isinstance(rule.get("replace"), str) else ""
    return f"{short(rule['match'])}{replace}"
