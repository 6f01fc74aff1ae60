"""``draftsmith convert DIR --to LAYOUT OUT``: read a draft through the rules of the spec ``inspect`` detects, into
canonical names and config facts; write them through the target layout's inverted rules and config style.

Tensors are copied bit for bit (a fused tensor's parts as its rows: convert/unfuse.py); the only data change is the q/k
row permutation between rotary pair orders (interleaved <-> neox, within each head), which is exact, so a round trip is
the identity. Everything that sits on those rows moves with them: q/k biases, per-channel FP8 scales, block scales where
every block keeps one scale (else refused: no block scale can say it), and the q_norm / k_norm vectors (draftsmith norms
each head before rotating it, so the norm's weight is per rotary dim); a tensor on the rows convert does not know how to
reorder is refused. What the names, shapes and config refuse is refused before a tensor is read.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from safetensors import SafetensorError

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.components.weights import SplitRefused
from draftsmith.assembler.config import flatten_draft_config
from draftsmith.assembler.explain import TRAIN_STEP, TRAIN_STEPS, progress_note, training_progress
from draftsmith.errors import OptionError, either, short, short_list, short_text, suggest
from draftsmith.folder_lock import exclusive
from draftsmith.paths import utf8_problem
from draftsmith.convert.canonical import Canonical, ConvertError, head_dim, plan_canonical, read_canonical
from draftsmith.convert.fits import fit, proposed_fit
from draftsmith.convert.inspect import Inspection, inspect_checkpoint
from draftsmith.convert.layouts import Layout, layout_config, layout_facts, layouts, writable_kinds
from draftsmith.convert.name_checks import name_problems, other_kind
from draftsmith.convert.quant_names import moved_quant_names
from draftsmith.convert.same_draft import build_differences, other_draft_line, spec_differences
from draftsmith.convert.rotary import (MLA_ROPE, permute_block_scale, permute_rows, rope_permutation, rotated,
                                       scale_block)
from draftsmith.convert.unfuse import moved_modules, unfused_note
from draftsmith.convert.verify import verify
from draftsmith.assembler.styles import STYLES, style_of

log = logging.getLogger("draftsmith")


class UnknownLayout(OptionError, ConvertError):
    """A ``--to`` that names no layout: a bad option value (exit 2), still a ConvertError to a caller."""


def check_family(src: str | Path, found: Inspection, table: Mapping[str, Layout]) -> None:
    """Refuse, before a tensor is read, a draft of a family no layout can write (an MTP layer, a plugin's fusion)."""
    if found.match is None:
        return   # plan_canonical says it
    kind = found.spec["draft"]["fusion"]["kind"]
    kinds = writable_kinds(table)
    if kind not in kinds:
        family = found.match.spec
        raise ConvertError(
            f"{short_text(src, 300)} is a {family} draft (draft.fusion.kind: {kind}); the layouts convert writes "
            f"({', '.join(table)}) hold drafts of fusion kind {either(sorted(kinds))} only, so there is nothing "
            f"to convert it into: load it as it is (--spec {family})")


def convert(src: str | Path, to: str, out: str | Path, spec: Any = None) -> dict[str, Any]:
    """Write ``src`` in layout ``to`` under ``out``; returns the written config. ``spec`` (a name, a YAML path or a
    Spec): read ``src`` with it instead of detecting its layout (a draft in a spec's own names, as train writes
    one); loaded before anything is made."""
    table = layouts()
    if to not in table:   # a bad option value (exit 2), before anything is read or created
        raise UnknownLayout(f"unknown layout {short(to)}; known: {', '.join(table)}.{suggest(to, table)}")
    if spec is not None:   # a spec's problem is said before OUT is made
        from draftsmith.specs.loader import load_spec

        load_spec(spec)
    out = Path(out)
    created = make_out(out)   # before a tensor is read: a place that cannot be written is refused first
    with exclusive(out) as mine:   # another convert into OUT: refused, and nothing of that run's is touched
        if not mine or any(out.iterdir()):
            raise ConvertError(f"{short_text(out, 300)} is {'in use by' if not mine else 'filled by'} another "
                               "process (a second convert into the same OUT?); convert writes a new folder or into "
                               "an empty one: give another OUT")
        try:
            return _convert(src, table[to], out, table, spec)
        except BaseException:
            remove_out(out, created)   # the folder was new or empty, and held: what is in it now is this run's
            raise


def layout_names(layout: Layout, names: list[str]) -> dict[str, str | None]:
    """Each canonical name's checkpoint name in ``layout`` (its rules' from_canonical), None where it has none (a
    source name no rule of the reading spec renamed, such as 'midlayer.x' read with a spec for other names, that the
    layout's rules would read back as another name)."""
    def written(name: str) -> str | None:
        try:
            return layout.rules.from_canonical(name)
        except ValueError:
            return None
    return {n: written(n) for n in names}


def make_out(out: Path) -> list[Path]:
    """Create the output folder (and its missing parents) and return the folders created, deepest first; a path
    that names no folder convert could write into is a ConvertError naming it, and nothing is left behind."""
    where = short_text(out, 300)
    if "\0" in str(out):
        raise ConvertError(f"output folder {short(str(out))}: a path cannot contain a NUL character")
    if why := utf8_problem(out):
        raise ConvertError(f"output folder {where} {why}")
    created: list[Path] = []
    try:
        if out.exists() and not (out.is_dir() and not any(out.iterdir())):   # nothing lost
            what = "a folder that is not empty" if out.is_dir() else "not a folder"
            raise ConvertError(f"{where} is {what}; convert writes a new folder or into an empty one")
        for folder in (out, *out.parents):
            if folder.is_dir():
                break
            created.append(folder)
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:   # under a regular file, a name too long, /proc, no permission, a read-only disk
        remove_out(out, created)
        raise ConvertError(f"cannot create the output folder {where}: {e.strerror or e}") from None
    return created


def remove_out(out: Path, created: list[Path]) -> None:
    """Remove what a failed convert wrote into ``out``, then the folders it created (deepest first)."""
    try:
        for f in out.iterdir() if out.is_dir() else ():
            f.unlink()
    except OSError:
        pass
    for folder in created:
        try:
            folder.rmdir()
        except OSError:
            pass


def _convert(src: str | Path, layout: Layout, out: Path,
             table: Mapping[str, Layout] | None = None, spec: Any = None) -> dict[str, Any]:
    to, table = layout.name, table or layouts()
    # once: the reading, the dtype check and verify's misfits all use it
    found = inspect_checkpoint(src, spec=spec)
    check_family(src, found, table)
    try:
        plan = plan_canonical(src, found)  # names, shapes and facts: every check below reads no tensor data
    except SplitRefused as e:   # a fused qkv_proj / gate_up_proj whose parts cannot be cut exactly: said as this
        # folder's, as every refusal below (convert/unfuse.py writes the parts apart where they can)
        raise ConvertError(f"{short_text(src, 300)} cannot be written as {to}:\n  {e}") from None
    names, rope = list(plan.sources), plan.rope
    problems = name_problems(layout, names, plan.spec, table)
    if kind := other_kind(found, layout, table, names, plan.spec):   # first: what the rest follows from
        problems.insert(0, kind)
    dest = layout_names(layout, names)
    if stray := [n for n, d in dest.items() if d is None]:   # no rule read it, and the layout's rules rename it
        problems.append(f"{short_list(stray, 4, 300)} matched no rule of spec {plan.spec}, and the {to} layout "
                        "would read them back under other names: the folder does not load with that spec (see "
                        f"`draftsmith inspect {short_text(src, 300)} --spec {plan.spec}`)")
    moved = moved_modules(plan.sources, dest)   # source -> result (a fused module -> its parts'): the config's too
    quant_config, unmoved = moved_quant_names(plan.facts.get("quantization_config"), moved)
    problems += unmoved + unsaid_theta(found)
    hd = head_dim(plan.facts)
    holds_any_key = not STYLES[layout.config].rename  # a params.json holds only its own keys (its order is implied)
    order = layout.rope
    if order != rope and any(MLA_ROPE.search(n) for n in names):   # rows convert does not permute
        if holds_any_key:
            order = rope   # kept as stored, and said in the config (rope_interleave)
        else:
            problems.append(f"the {to} layout implies {layout.rope} rope rows; this latent-attention draft stores "
                            f"{rope} ones in q_b_proj / kv_a_proj_with_mqa, which convert does not reorder")
    how: dict[str, str] = {}
    block = scale_block(found)
    rows_per_block = block[0] if block else None
    if order != rope:
        how, unknown = rotated(plan.shapes, hd, rows_per_block)
        problems += unknown
    # convert copies dtypes as they are: one assemble() refuses would be written faithfully and refused at load
    before = proposed_fit(found)
    if before is not None and before.misfits:   # convert moves what the folder holds: a misfit is carried, not mended
        said = short_list([f"{why}: {name!r}" for name, why in sorted(before.misfits.items())], 4, 300, quote=False)
        log.warning("note: %s does not load with spec %s as it is (%s); convert writes the tensors it holds, as "
                    "they are", short_text(src, 300), found.match.spec, said)
    problems += [f"{line}: assemble() would refuse it in any layout; store it as the model expects"
                 for line in (before.refused if before else ())]
    refused = f"{short_text(src, 300)} cannot be written as {to}:\n  "
    if problems:
        raise ConvertError(refused + "\n  ".join(problems))
    tensors, facts, rope, _ = read_canonical(src, found, plan=plan)
    perm = rope_permutation(hd, rope, order)
    moved = {}
    for canon, kind in how.items():
        t = tensors.get(canon)
        if t is None or kind == "keep":
            continue
        if kind == "rows":
            moved[canon] = permute_rows(t, hd, perm)
            continue
        weight = tensors[canon.removesuffix("_scale_inv")]
        if (scale := permute_block_scale(t, weight.shape[0], hd, perm, rows_per_block)) is None:
            problems.append(f"{canon}: its {rows_per_block}-row FP8 scale blocks split the {hd}-row heads whose rows "
                            f"the {rope} -> {order} rotary order moves, and the blocks a new block would gather hold "
                            f"different scales: no block scale states the reordered weight exactly (dequantize it "
                            f"first)")
        else:
            moved[canon] = scale
    if problems:
        raise ConvertError(refused + "\n  ".join(problems))
    expected = tensors | moved
    written = {}
    for canon, t in expected.items():
        written[layout.rules.from_canonical(canon)] = t   # by the tensors read, not the plan (verify names a stray)
    if len(written) != len(tensors):
        raise ConvertError(f"the {to} layout's rules map two tensors to one name")
    facts = layout_facts(layout, facts, names, int(tensors["d2t"].shape[0]) if "d2t" in tensors else None)
    if quant_config is not None:
        facts["quantization_config"] = quant_config
    facts.pop("rope_interleave", None)
    if holds_any_key and (rope != "neox" or order != "neox"):  # say the order where it is not Llama's
        facts["rope_interleave"] = order == "interleaved"
    style = STYLES[layout.config]
    config = layout_config(layout, facts, found.config, style_of(src, found.config), written)
    # a training checkpoint saved mid-run stays one: its loads are told so, as the source's are
    progress = training_progress(Path(src).glob("*.safetensors"))
    meta = {} if progress is None else {TRAIN_STEP: str(progress[0]), TRAIN_STEPS: str(progress[1])}
    if progress is not None:
        log.warning("note: %s: %s; the converted draft says so too", short_text(src, 300), progress_note(*progress))
    _write(out, lambda: (out / style.file).write_text(json.dumps(config, indent=2) + "\n"))
    _write(out, lambda: save_safetensors(written, out, layout.weights, metadata=meta))
    left, reader = unread_copies(out, plan, layout)   # frozen copies no reader of the result has a place for
    if left:
        for canon in left:
            del written[layout.rules.from_canonical(canon)], expected[canon], tensors[canon]
        _write(out, lambda: save_safetensors(written, out, layout.weights, metadata=meta))
        log.warning("note: %s left out of %s: the %s spec ignores it in %s (a frozen copy of the target's, never "
                    "read) and %s, the spec that reads the %s result, would refuse it (its readers take the "
                    "target's); the source still holds it", short_list([plan.sources[c] for c in left], 4, 200),
                    short_text(out, 300), plan.spec, short_text(src, 300), reader, to)
    if note := unfused_note(src, plan.sources):
        log.warning("%s", note)
    verify(out, facts, expected, to, before=before, source=tensors, orders=(rope, order), block=block,
           drops=layout.drops, src=src, read_with=None if spec is None else found.match.spec)
    return config


def unsaid_theta(found: Inspection) -> list[str]:
    """A spec's ``draft.attention.rope_theta`` that the draft config does not state (a draft trained with 10000 whose
    config says otherwise): a layout states the rope base only in the config it writes, the source's, so the result
    would load with the config's base; refused, with the way to say it (a review of round 26)."""
    from draftsmith.components.params import gqa_reads

    theta = ((found.spec or {}).get("draft", {}).get("attention") or {}).get("rope_theta", "auto")
    stated = gqa_reads(None, flatten_draft_config(found.config)).get("rope_theta")
    if theta == "auto" or (stated is not None and float(stated) == float(theta)):
        return []
    return [f"the spec's draft.attention.rope_theta is {short(theta)}, the draft config's rope_theta "
            f"{short(stated)}: the written config would carry the config's; set rope_theta: {short(theta)} in the "
            "draft's config.json first"]


def _write(out: Path, write) -> None:
    try:
        write()
    except (OSError, SafetensorError) as e:   # a full or read-only disk: said, and what was written removed
        why = getattr(e, "strerror", None) or short_text(str(e), 300)
        raise ConvertError(f"cannot write into {short_text(out, 300)}: {why}") from None


def unread_copies(out: Path, plan: Canonical, layout: Layout) -> tuple[list[str], str | None]:
    """(the carried canonical names that the spec detection proposes for the written ``out`` would refuse by name,
    that spec's family): carried are the tensors the source's spec ignores, frozen copies of the target's, e.g.
    speculators' lm_head copy, which the flat EAGLE-1 layout has no place for (its readers take the target's head;
    EAGLE's own strict load refuses the name)."""
    if not plan.carried:
        return [], None
    written = inspect_checkpoint(out)
    judged = proposed_fit(written)
    if judged is None:
        return [], None
    refused = {judged.names[c] for c, why in judged.misfits.items() if why == "unexpected" and c in judged.names}
    return sorted(c for c in plan.carried if layout.rules.from_canonical(c) in refused), written.match.spec


def loading_line(out: str | Path, source: Inspection | None = None) -> str:
    """What loads a written draft, as convert's first line (a comment before the written config) says it: the spec
    detection proposes for it (what ``generate --draft`` without --spec takes, and ``draftsmith inspect OUT``
    prints), named by its family where
    that built-in spec alone reads it the same (its ``auto`` values are read from the same config), else the values
    the family spec lacks. Where that spec builds another draft than the one ``source`` (the converted folder's
    inspection) was read with, e.g. a plugin family's draft whose norm or MLP is the plugin's, the line says so and
    names a spec that builds the source's draft instead (:mod:`draftsmith.convert.same_draft`)."""
    from draftsmith.specs.loader import load_spec

    where = short_text(out, 300)
    found = inspect_checkpoint(out)
    if found.match is None:
        return f"detection finds no layout in it: `draftsmith inspect {where}` says why"
    family = found.match.spec
    if source is not None and source.spec is not None and (differ := build_differences(source.spec, found.spec)):
        return other_draft_line(found, source, differ)
    judged = fit(found.folder, found.spec)
    if judged is not None and judged.misfits:   # e.g. q_norm / k_norm, which detection does not read
        names = short_list(sorted(judged.misfits), 4, 200)
        return (f"the spec detection proposes ({family}) does not load it as it is ({names}: "
                f"{', '.join(sorted(set(judged.misfits.values())))}); start from `draftsmith inspect {where}`")
    base = load_spec(family).model_dump(mode="json")
    lacks = spec_differences(found.spec, base)
    if not lacks:
        return f"load it with spec {family} (or omit --spec: generate --draft detects it)"
    shown = ", ".join(f"{path}: {_shown(path, value, base)}" for path, value in lacks[:4]) + (
        ", ..." if len(lacks) > 4 else "")
    return (f"omit --spec: generate --draft detects it (spec {family} with {shown}, as `draftsmith inspect {where}` "
            f"prints); spec {family} alone does not load it")


def _shown(path: str, value: Any, family: Mapping[str, Any]) -> str:
    """A proposed value as that line says it, bounded: the weight rules as counts by kind of the rules added and
    removed ("2 split rule(s) added"; the rules themselves are in what inspect prints), anything else cut short."""
    if path != "weights.rules" or not isinstance(value, (list, tuple)):
        return short(value, 80)
    was = list(family.get("weights", {}).get("rules") or [])

    def counted(rules: list, verb: str) -> list[str]:
        kinds = [str(r.get("kind", "regex")) if isinstance(r, Mapping) else "other" for r in rules]
        return [f"{kinds.count(k)} {k} rule(s) {verb}" for k in dict.fromkeys(kinds)]

    said = (counted([r for r in value if r not in was], "added")
            + counted([r for r in was if r not in value], "removed"))
    return ", ".join(said) or "the same rules in another order"
