"""convert's reading of a fused tensor (a split rule's ``qkv_proj`` / ``gate_up_proj``): each part becomes its own
canonical tensor, so every layout writes the parts apart (vLLM's and the other engines' readers take q/k/v and
gate/up unfused).

Each part's rows are the ones the load plan gives it: :func:`draftsmith.assembler.splits.split_rows` on the model
the spec builds (on meta, with the stand-in target the draft's config implies: convert/fits.py), the very sizes
``assemble()`` cuts at load, and the same for every stand-in guessing the target otherwise (else refused: the
target would decide them). FP8 scales split as the load splits them: per-channel scales by rows, a per-tensor scale
copied whole to every part, block scales only between whole blocks (a block straddling two parts is refused, as a
load refuses it). Nothing here reads tensor data.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from draftsmith.components.weights import RemapCollision, RuleSet, SplitRefused
from draftsmith.errors import DraftsmithError, short_list, short_text

Rows = dict[str, tuple[int, int]]   # canonical part -> [start, stop) rows of its fused tensor


def read_mapping(found: Any, rules: RuleSet, names: Iterable[str]) -> tuple[dict[str, tuple[str, int | None]], Rows]:
    """(canonical -> (checkpoint name, rule index), rows of each split part) for the checkpoint ``names`` read
    through ``rules``: one checkpoint tensor per canonical tensor, or a fused one whose parts the load plan sizes.
    RemapCollision lists every colliding pair; SplitRefused says a fused tensor no part sizes fit."""
    remap = rules.remap(names)
    if remap.collisions:
        raise RemapCollision(remap.pairs, rules)
    if not remap.split:
        return remap.mapping, {}
    return remap.mapping, part_rows(found, remap.split)


def part_rows(found: Any, split: Mapping[str, tuple[str, ...]]) -> Rows:
    """The rows of each part of each fused tensor in ``split`` (checkpoint name -> its parts' canonical names), as
    the load plan cuts them on the model ``found``'s spec builds; SplitRefused where they cannot be told exactly."""
    from draftsmith.assembler.splits import split_rows
    from draftsmith.convert.fits import Fit, stand_in_model

    fused = short_list(sorted(split), 4, 200)
    try:
        judged = stand_in_model(Path(found.folder), found.spec)
    except DraftsmithError as e:   # the spec the draft is read with does not parse: no model to size the parts by
        judged = Fit({}, [" ".join(str(e).split())])
    if judged is None or isinstance(judged, Fit):
        why = "no stand-in target can be made from its config" if judged is None else "; ".join(judged.refused)
        raise SplitRefused(f"{fused}: fused, and convert writes its parts apart with the rows the model gives "
                           f"each, but {why}; load the draft with assemble() and its spec instead")
    remap, expected, infos, rules, others, _ = judged
    rows, problems = split_rows(remap, infos, expected, remap.mapping, rules.describe)
    if problems:   # the load plan's own refusal: a block straddling two parts, rows that are not the parts' sum
        raise SplitRefused("\n  ".join(problems))
    for src, parts in split.items():
        shape = tuple(infos[src].shape)
        if any(c not in rows for c in parts) and shape not in ((1,), ()):   # only a per-tensor scale is shared whole
            lacking = [c for c in parts if c not in expected] or [c for c in parts if c not in rows]
            problems.append(f"cannot split: fused {src!r} {list(shape)}: the model the spec builds has no "
                            f"{short_list(lacking, 4, 200)} to size its parts by (see `draftsmith inspect "
                            f"{short_text(found.folder, 300)}`)")
        for canon in (c for c in parts if c in rows):
            n = rows[canon][1] - rows[canon][0]
            if guessed := [g for g, exp in others.items() if exp and canon in exp and exp[canon].shape[0] != n]:
                problems.append(f"cannot split: fused {src!r}: the rows of its part {canon!r} depend on the target "
                                f"(a stand-in guessing {guessed[0]} gives it other rows), which convert does not know")
    if problems:
        raise SplitRefused("\n  ".join(dict.fromkeys(problems)))
    return rows


def part_shape(shape: tuple[int, ...], rows: tuple[int, int] | None) -> tuple[int, ...]:
    """A part's shape: its rows of the fused ``shape`` (a part without rows takes the whole tensor)."""
    return shape if rows is None else (rows[1] - rows[0], *shape[1:])


def cut(t: torch.Tensor, rows: tuple[int, int] | None, shared: bool) -> torch.Tensor:
    """A part's own tensor: its rows of the fused ``t`` (or ``t`` whole), copied out where several parts read ``t``
    (``shared``) so no written tensor is a view of another."""
    if rows is not None:
        t = t.narrow(0, rows[0], rows[1] - rows[0])
    return t.clone() if shared else t


def moved_modules(sources: Mapping[str, str], dest: Mapping[str, str | None]) -> dict[str, str | tuple[str, ...]]:
    """Source module -> the result's module(s) (a fused module -> its parts', in row order), from each canonical
    weight's source name and written name: what the config's quantization_config names are moved by."""
    moved: dict[str, list[str]] = {}
    for canon, src in sources.items():
        if canon.endswith(".weight") and dest.get(canon) is not None:
            moved.setdefault(src.removesuffix(".weight"), []).append(dest[canon].removesuffix(".weight"))
    return {src: news[0] if len(news) == 1 else tuple(news) for src, news in moved.items()}


def unfused_note(src: str | Path, sources: Mapping[str, str]) -> str | None:
    """The note convert gives a draft whose fused tensors it writes apart (``sources``: canonical -> checkpoint
    name), or None where it holds none."""
    fused = [name for name, n in Counter(sources.values()).items() if n > 1]
    if not fused:
        return None
    return (f"note: {short_text(src, 300)}: fused {short_list(fused, 4, 200)} written as their parts, each its "
            "rows as assemble() cuts them")
