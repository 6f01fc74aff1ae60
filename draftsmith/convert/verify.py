"""The independent check of a written result: read the output back as any user would and compare it with what
was meant to be written, and, where the source is given, with the source itself (bit for bit, or the rotated q/k
rows' dequantized values against the source's reordered by the definition of the two pair orders)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from draftsmith.errors import short, short_text
from draftsmith.convert.canonical import ConvertError, head_dim, read_canonical, same_bits
from draftsmith.convert.fits import Fit, introduced_misfits
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.convert.rotary import ROW_SCALES, reorder_heads


def verify(out: Path, facts: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], to: str,
           before: Fit | None = None, source: Mapping[str, torch.Tensor] | None = None,
           orders: tuple[str, str] = ("neox", "neox"), block: tuple[int, int] | None = None,
           drops: tuple[str, ...] = (), src: Path | None = None, read_with: str | None = None) -> None:
    """Read the written checkpoint back as any user would (detection, its spec's rules, its config style) and
    compare: a layout that cannot say a fact (e.g. EAGLE 3.1's norm_output in a flat Llama config whose family does
    not imply it) is refused here (convert() then removes the output), never left to load wrong. With ``before``
    (the source's fit), also the tensor names the written draft's proposed spec would refuse and the source's did
    not (:func:`draftsmith.convert.fits.introduced_misfits`). With ``source`` (the source's canonical tensors) and
    ``orders`` (its rotary order, the written one), also against an expectation computed apart from the writing:
    each tensor the source's bit for bit, except the rotated q/k rows, whose dequantized values (``block``: the FP8
    scale block, rows x columns) must be the source's reordered by :func:`reorder_heads`. ``drops``: the facts the
    layout does not write, which the read-back may still derive (an EAGLE-1 draft's ``bias``, from its tensors):
    not compared. ``src``: the source folder, which a refusal names as convert's others do; ``read_with``: the
    spec it was read with (convert --spec), which loads it as it is where detection does not."""
    written = inspect_checkpoint(out)
    try:
        got, got_facts, _, _ = read_canonical(out, written)
    except ConvertError:
        got, got_facts = {}, {}
    diff = sorted(k for k in {*facts, *got_facts} - {*drops} if facts.get(k) != got_facts.get(k))
    bad = sorted(k for k in {*tensors, *got} if k not in got or k not in tensors or not same_bits(tensors[k], got[k]))
    wrong = [] if source is None else unlike_source(source, got, head_dim(facts), orders, block)
    # as assemble() would see it: names the written draft's spec refuses and the source's did not
    misfits = [] if diff or bad or wrong or before is None else introduced_misfits(before, written)
    if diff or bad or wrong or misfits:   # convert() removes what was written (and only folders it created)
        what = [f"{short_text(k, 200)}: {short(facts.get(k))} would read back as {short(got_facts.get(k))}"
                for k in diff[:6]]
        what += [f"tensor {short_text(k, 200)} would not read back" for k in bad[:6]]
        what += [f"tensor {short_text(k, 200)} would not compute what the source's does" for k in wrong[:6]]
        what += [f"its spec would refuse it: {m}" for m in misfits[:6]]
        if (more := sum(max(len(found) - 6, 0) for found in (diff, bad, wrong, misfits))) > 0:
            what.append(f"... and {more} more")
        head = f"{short_text(src, 300)} cannot be written as {to}: " if src is not None else ""
        hint = "" if not diff else f"\n  {UNSAID}" if read_with is None else \
            f"\n  keep it in a layout that says it, or load it as it is: --spec {short_text(read_with, 300)}"
        raise ConvertError(f"{head}the {to} layout cannot express this draft (nothing written):\n  "
                           + "\n  ".join(what) + hint)


# what a refusal for facts a layout cannot say tells the user to do
UNSAID = "keep it in a layout that says it (the source's own), or load it as it is: generate --draft detects it"
ROTATED_VALUES = re.compile(r"^layers\.\d+\.self_attn\.([qk]_proj\.(weight|bias)|[qk]_norm\.(weight|bias))$")
ROTATED_SCALES = re.compile(r"^layers\.\d+\.self_attn\.[qk]_proj\.(?!weight$|bias$)")


def unlike_source(source: Mapping[str, torch.Tensor], got: Mapping[str, torch.Tensor], hd: int,
                  orders: tuple[str, str], block: tuple[int, int] | None) -> list[str]:
    """The canonical names whose read-back value is not the source's: bit for bit, or for the rotated q/k rows
    (weights, biases, q/k norms) their dequantized values against the source's reordered from ``orders[0]`` pair
    order to ``orders[1]`` (the scales are judged through the weights they scale)."""
    wrong = []
    for name, t in source.items():
        have = got.get(name)
        if have is None:
            wrong.append(name)
        elif orders[0] != orders[1] and ROTATED_SCALES.match(name):
            continue
        elif orders[0] != orders[1] and ROTATED_VALUES.match(name):
            try:
                want = reorder_heads(dequantized(source, name, block), hd, *orders)
                ok = same_bits(want, dequantized(got, name, block))
            except (RuntimeError, ValueError):   # shapes that do not fit: not the source's
                ok = False
            if not ok:
                wrong.append(name)
        elif not same_bits(t, have):
            wrong.append(name)
    return sorted(wrong)


def dequantized(tensors: Mapping[str, torch.Tensor], name: str, block: tuple[int, int] | None) -> torch.Tensor:
    """``tensors[name]`` as the model computes with it: an FP8 weight times its scale (per tensor, per row, or per
    ``block``), else as stored."""
    from draftsmith.components.quant import dequantize

    t, base = tensors[name], name.removesuffix("weight")
    if not name.endswith(".weight"):
        return t
    if (scale := tensors.get(base + "weight_scale_inv")) is not None:
        if block is None:
            raise ValueError(f"{name}: block scales without a block size")
        return dequantize(t, scale, "block", block)
    for suffix in ROW_SCALES:
        if (scale := tensors.get(base + suffix)) is not None:
            s = scale.to(torch.float32)
            s = s.reshape(()) if s.numel() == 1 else s.reshape(t.shape[0], *[1] * (t.dim() - 1))
            return t.to(torch.float32) * s
    return t
