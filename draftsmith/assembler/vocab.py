"""Reduced draft vocabularies: ``d2t`` offsets (target = draft + d2t[draft]) and the ``t2d`` mask."""
from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from draftsmith.errors import DraftsmithError, short_text

if TYPE_CHECKING:
    from draftsmith.assembler.load import PlannedLoad
    from draftsmith.components.weights import RemapResult
    from draftsmith.specs.schema import Spec

log = logging.getLogger("draftsmith")


class VocabMapError(DraftsmithError, ValueError):
    pass


D2T_WORDS = {"offset": "offsets", "absolute": "target ids"}   # draft.vocab.d2t -> what the tensor holds


def held_shapes(remap: RemapResult, infos: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """canonical name -> the shape of the one tensor it is read from: ``remap``, a rule set's remap of a listing
    ``infos`` (name -> its TensorInfo), which the caller has made already (convert's fit) or makes once; a split
    tensor's parts are left out (not its shape), and a name several tensors collide on: what
    :func:`config_contradictions` is given by a load, its refusal's note and convert's fit alike."""
    return {canon: tuple(infos[name].shape) for canon, (name, _) in remap.mapping.items() if name not in remap.split}


def config_contradictions(draft_raw: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]],
                          target_vocab: int | None = None) -> list[str]:
    """Where the draft's config.json states a vocabulary size its tensors' shapes contradict, one line each naming
    the key, its value and the tensor's shape; `inspect` and a load (`generate`) say the same lines. A draft's own head
    has draft_vocab_size rows and its d2t that length; its t2d is the target's vocabulary, vocab_size long, and a head
    without a d2t has a row per target token. ``draft_raw``: the config as written (its flat keys read);
    ``shapes``: canonical name -> the shape of the tensor it is read from. ``target_vocab`` (a load's: the target's
    vocabulary): a draft_vocab_size above it, which reads as none, is said too, unless a line says the key already
    (once: a head with the target's rows contradicts it)."""
    from draftsmith.assembler.config import flatten_draft_config, written_key

    flat, key = flatten_draft_config(draft_raw), written_key(draft_raw)
    sizes = {k: v for k in ("draft_vocab_size", "vocab_size") if type(v := flat.get(k)) is int}
    checks = [("draft_vocab_size", "lm_head.weight", ""), ("draft_vocab_size", "d2t", ""), ("vocab_size", "t2d", "")]
    if "d2t" not in shapes:
        checks.append(("vocab_size", "lm_head.weight", " and it holds no d2t"))
    said = [(k, f"its config.json says {key(k)} {sizes[k]}, but its {name} is {list(shape)}{more}")
            for k, name, more in checks if k in sizes and (shape := shapes.get(name)) and shape[0] != sizes[k]]
    if target_vocab is not None and sizes.get(vd := "draft_vocab_size", 0) > target_vocab and vd not in dict(said):
        said.append((vd, f"its config.json's {key(vd)} {sizes[vd]} is above the target's vocabulary of {target_vocab} "
                         "ids: the draft's head is sized by the target's (engines size it by this key: is the draft "
                         "made for this target?)"))
    return [line for _, line in said]


def as_offsets(d2t: torch.Tensor, convention: str) -> torch.Tensor:
    """A checkpoint's d2t as the model keeps it (offsets: target = draft + d2t[draft]), read in ``convention``
    (draft.vocab.d2t: ``offset`` or ``absolute``)."""
    return d2t - torch.arange(d2t.shape[0], dtype=d2t.dtype) if convention == "absolute" else d2t


def check_vocab_map(d2t: torch.Tensor, t2d: torch.Tensor | None, *, source: str = "draft",
                    vocab: int | None = None, convention: str = "offset") -> None:
    """Refuse a map that would silently collapse acceptance: every rule of invariant 24, all reported at once.

    An all-zero d2t is valid (the draft keeps the first Vd target tokens, and t2d says so); a d2t missing from
    the checkpoint is the load plan's to report, as a missing tensor. ``t2d`` None: the checkpoint holds none (it
    is derived from d2t), and d2t is checked against the target's ``vocab``. ``d2t`` holds offsets (as the model
    keeps it); ``convention`` is how the checkpoint holds it, which the problems name (``d2t[d]`` for absolute
    ids: the user's spec says absolute, and "d + d2t[d]" would describe another tensor)."""
    d2t = d2t.cpu()
    t2d = t2d.cpu() if t2d is not None else None
    vd, v = d2t.shape[0], (t2d.shape[0] if t2d is not None else vocab)
    problems = []
    target = torch.arange(vd) + d2t
    if t2d is not None and int(t2d.sum()) != vd:
        problems.append(f"t2d marks {int(t2d.sum())} target tokens but the draft vocabulary has {vd}")
    ids = "d2t[d] (absolute target ids)" if convention == "absolute" else "d + d2t[d]"
    if vd > 1 and not bool((target[1:] > target[:-1]).all()):
        problems.append(f"{ids} is not strictly increasing")
    if bool(((target < 0) | (target >= v)).any()):
        problems.append(f"{ids} leaves the target vocabulary 0..{v - 1}")
    elif t2d is not None and not bool(t2d[target].all()):
        problems.append(f"t2d does not hold at {ids} for every draft token")
    if problems:
        raise VocabMapError(f"{source}: invalid draft-to-target vocabulary map:\n  " + "\n  ".join(problems))


def target_to_draft(t2d: torch.Tensor) -> torch.Tensor:
    """[V] draft id of each kept target token, -1 elsewhere (the inverse of d + d2t[d])."""
    out = torch.full(t2d.shape, -1, dtype=torch.long)
    out[t2d.cpu()] = torch.arange(int(t2d.sum()))
    return out


def make_vocab_map(kept: torch.Tensor, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(d2t, t2d) for the sorted target ids ``kept``."""
    kept = kept.sort().values
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[kept] = True
    return kept - torch.arange(kept.shape[0]), t2d


def check_draft_vocab(spec: Spec, planned: PlannedLoad, draft_dir: Path) -> None:
    """The draft's d2t / t2d (a few KB), read and checked before the load (validate runs it too): a map that
    would collapse acceptance was refused only after every tensor of both models had been read."""
    check_vocab_tensors(spec, planned.module, planned.plan.sources, planned.infos, draft_dir)


def check_vocab_tensors(spec: Spec, module, sources, infos, draft_dir: Path) -> None:
    """:func:`check_draft_vocab` given the draft model, its canonical -> checkpoint names (``sources``) and the
    checkpoint's tensors (``infos``): also run where the plan refused other tensors, so that a bad map is said with
    them (it was said only once they were fixed); nothing where d2t / t2d are missing or misshapen (the plan says
    that)."""
    names = [n for c in ("d2t", "t2d") if (n := sources.get(c)) is not None]
    if not hasattr(module, "d2t") or sources.get("d2t") not in infos or not all(n in infos for n in names):
        return   # no reduced vocabulary, or the plan reported the tensors missing
    from draftsmith.assembler.plan import wrong_dtype

    if any(tuple(infos[n].shape) != tuple(getattr(module, c).shape) or wrong_dtype(infos[n].dtype,
                                                                                  getattr(module, c).dtype)
           for c in ("d2t", "t2d") if (n := sources.get(c)) is not None and hasattr(module, c)):
        return   # misshapen, or of a dtype the load refuses (a float or bool map): the plan's problem
    from draftsmith.assembler.checkpoint import read_tensors

    found = read_tensors(infos, names)
    stored, said = found[names[0]], spec.draft.vocab.d2t
    t2d = found[names[1]] if len(names) > 1 else None   # none: derived from d2t (models.DraftModel.reset_buffers)
    if t2d is None:
        log.warning("draftsmith: %s holds no t2d (or the spec ignores it): derived from d2t read as %s "
                    "(vocab.d2t), which nothing in the checkpoint can confirm", short_text(draft_dir, 300),
                    D2T_WORDS[said])
    check = functools.partial(check_vocab_map, t2d=t2d, source=str(draft_dir), vocab=module.target_vocab)
    try:
        check(as_offsets(stored, said), convention=said)
    except VocabMapError as e:   # the map as the other convention reads it may be sound: then the spec misreads it
        other = next(c for c in D2T_WORDS if c != said)
        try:
            check(as_offsets(stored, other), convention=other)
        except VocabMapError:
            raise e from None
        raise VocabMapError(f"{e}\nnote: the spec reads d2t as {D2T_WORDS[said]} (draft.vocab.d2t: {said}); read as "
                            f"{D2T_WORDS[other]} it is a sound map: set draft.vocab.d2t: {other}") from None
