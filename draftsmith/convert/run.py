"""``draftsmith convert DIR --to LAYOUT OUT``: read a draft through the rules of the spec ``inspect`` detects, into
canonical names and config facts; write them through the target layout's inverted rules and config style.

Tensors are copied bit for bit; the only data change is the q/k row permutation between rotary pair orders
(interleaved <-> neox, within each head), which is exact, so a round trip is the identity.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors import SafetensorError

from draftsmith.assembler.checkpoint import read_tensors, save_safetensors
from draftsmith import limits
from draftsmith.errors import DraftsmithError, short, short_list, short_text
from draftsmith.options import utf8_problem
from draftsmith.components.weights import RegexRule, RuleSet
from draftsmith.convert.fits import Fit, introduced_misfits, proposed_fit
from draftsmith.convert.inspect import Inspection, inspect_checkpoint
from draftsmith.assembler.styles import STYLES, style_of, to_facts, from_facts

LAYOUTS_FILE = Path(__file__).parent / "layouts.yaml"
RESOLVED = ("norm_before_residual", "fc_norm", "norm_before_fc", "norm_output")
QK = re.compile(r"^layers\.\d+\.self_attn\.[qk]_proj\.(weight|bias)$")
MLA_ROPE = re.compile(r"^layers\.\d+\.self_attn\.(q_b_proj|kv_a_proj_with_mqa)\.")   # rope rows inside, per head


class ConvertError(DraftsmithError, ValueError):
    """A checkpoint the target layout cannot express, or a place it cannot be written."""


@dataclass(frozen=True)
class Layout:
    name: str
    description: str
    config: str
    weights: str
    rope: str
    rules: RuleSet
    spec: str
    holds: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    max_layers: int | None = None


def layouts() -> dict[str, Layout]:
    from draftsmith.assembler.build import rule_set
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec

    out = {}
    for name, row in yaml.safe_load(LAYOUTS_FILE.read_text()).items():
        rules = list(rule_set(load_spec(row["rules_from"]), default_registry()).rules) if "rules_from" in row else []
        rules += [RegexRule.model_validate(r) for r in row.get("rules", [])]
        out[name] = Layout(name, row["description"], row["config"], row["weights"], row["rope"], RuleSet(rules),
                           row["spec"], tuple(row.get("holds", ())), tuple(row.get("requires", ())),
                           row.get("max_layers"))
    return out


def rope_permutation(head_dim: int, src: str, dst: str) -> torch.Tensor:
    """Row order within one head taking ``src`` pair order to ``dst``: interleaved pairs (2i, 2i+1) become neox
    pairs (i, i + d/2), so new row j < d/2 is old row 2j and new row j + d/2 is old row 2j + 1."""
    to_neox = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    if src == dst:
        return torch.arange(head_dim)
    return to_neox if (src, dst) == ("interleaved", "neox") else torch.argsort(to_neox)


def permute_rows(t: torch.Tensor, head_dim: int, perm: torch.Tensor) -> torch.Tensor:
    # t: [heads * head_dim, ...] -> the same rows, reordered within each head
    heads = t.shape[0] // head_dim
    return t.reshape(heads, head_dim, *t.shape[1:])[:, perm].reshape(t.shape)


def read_canonical(folder: str | Path, found: Inspection | None = None
                   ) -> tuple[dict[str, torch.Tensor], dict[str, Any], str, str]:
    """(canonical tensors, config facts, source rope order, detected spec) of a draft checkpoint; ``found``: its
    inspection, when the caller made it already."""
    from draftsmith.assembler.build import rule_set
    from draftsmith.assembler.config import flatten_draft_config
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec

    found = found or inspect_checkpoint(folder)
    if found.match is None:
        where = short_text(folder, 300)
        raise ConvertError(f"{where}: not a layout draftsmith recognises; run `draftsmith inspect {where}`")
    spec = load_spec(found.match.spec)
    rules = rule_set(spec, default_registry(), flatten_draft_config(found.config))
    mapping = rules.map_names(n for n in found.infos if not rules.is_ignored(n))
    facts = to_facts(found.config, style_of(folder, found.config))
    check_facts(facts)   # before a tensor is read
    data = read_tensors(found.infos, [src for src, _ in mapping.values()])
    tensors = {canon: data[src] for canon, (src, _) in mapping.items()}
    ignored = [n for n in found.infos if rules.is_ignored(n)]
    renamed = RuleSet(rules.rules)   # the same rules, ignoring nothing: an ignored tensor's canonical name
    for n, t in read_tensors(found.infos, ignored).items():
        canon = renamed.to_canonical(n)[0]
        tensors[n if canon in tensors else canon] = t   # never over a tensor the draft itself holds
    # e.g. a frozen embed copy, carried along: model.embed_tokens.weight (NeMo) is embed_tokens.weight elsewhere
    if found.spec["draft"].get("vocab", {}).get("d2t") == "absolute" and "d2t" in tensors:
        d2t = tensors["d2t"]   # canonical d2t holds offsets, the published convention every layout (and vLLM) reads
        tensors["d2t"] = d2t - torch.arange(d2t.shape[0], dtype=d2t.dtype)
    fusion = found.spec["draft"]["fusion"]
    facts |= {k: fusion[k] for k in RESOLVED if k in fusion}  # every flag stated, as the spec resolved it
    if isinstance(fusion.get("aux_layers"), Mapping) and fusion["aux_layers"].get("ids"):
        facts["eagle_aux_hidden_state_layer_ids"] = list(fusion["aux_layers"]["ids"])
    rope = found.spec["draft"]["attention"].get("rope", "neox")
    return tensors, facts, rope, found.match.spec


def _size(facts: Mapping[str, Any], key: str, most: int) -> int | None:
    value = facts.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise ConvertError(f"the draft config's {key} is {short(value)}; an integer in 1..{most} is expected")
    return value


def check_facts(facts: Mapping[str, Any]) -> None:
    """The config fields convert itself computes with (the head size of the rotary permutation), refused with a
    clear error before a tensor is read: inspect reads a config as written, without the loader's checks."""
    head = _size(facts, "head_dim", limits.WIDTH)
    hidden, heads = _size(facts, "hidden_size", limits.WIDTH), _size(facts, "num_attention_heads", limits.HEADS)
    if head is None and (hidden is None or heads is None):
        raise ConvertError("the draft config gives no head_dim, and no hidden_size and num_attention_heads to "
                           "compute it from")
    if head is None and hidden % heads:
        raise ConvertError(f"the draft config's hidden_size ({hidden}) is not a multiple of num_attention_heads "
                           f"({heads}) and no head_dim is given")


def head_dim(facts: Mapping[str, Any]) -> int:
    # facts as read_canonical returns them: check_facts has passed
    return int(facts.get("head_dim") or facts["hidden_size"] // facts["num_attention_heads"])


def convert(src: str | Path, to: str, out: str | Path) -> dict[str, Any]:
    """Write ``src`` in layout ``to`` under ``out``; returns the written config."""
    table = layouts()
    if to not in table:
        raise ConvertError(f"unknown layout {short(to)}; known: {', '.join(table)}")
    out = Path(out)
    created = make_out(out)   # before a tensor is read: a place that cannot be written is refused first
    try:
        return _convert(src, table[to], out)
    except BaseException:
        remove_out(out, created)   # the folder was new or empty: what is in it now is this run's
        raise


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


def _convert(src: str | Path, layout: Layout, out: Path) -> dict[str, Any]:
    to = layout.name
    found = inspect_checkpoint(src)   # once: the reading, the dtype check and verify's misfits all use it
    tensors, facts, rope, _ = read_canonical(src, found)
    names = list(tensors)
    problems = []
    n_layers = len({m.group(1) for n in names if (m := re.match(r"^layers\.(\d+)\.", n))})
    if layout.max_layers is not None and n_layers > layout.max_layers:
        problems.append(f"{n_layers} layers; the {to} layout holds at most {layout.max_layers}")
    for pattern in layout.requires:
        if not any(re.search(pattern, n) for n in names):
            problems.append(f"no tensor matches {pattern!r}, which the {to} layout's family needs")
    if layout.holds:
        alien = [n for n in names if not any(re.search(p, n) for p in layout.holds)]
        if alien:
            problems.append(f"the {to} layout cannot express {short_list(alien, 6, 200, quote=False)}")
    hd = head_dim(facts)
    holds_any_key = not STYLES[layout.config].rename  # a params.json holds only its own keys (its order is implied)
    order = layout.rope
    if order != rope and any(MLA_ROPE.search(n) for n in names):   # rows convert does not permute
        if holds_any_key:
            order = rope   # kept as stored, and said in the config (rope_interleave)
        else:
            problems.append(f"the {to} layout implies {layout.rope} rope rows; this latent-attention draft stores "
                            f"{rope} ones in q_b_proj / kv_a_proj_with_mqa, which convert does not reorder")
    if order != rope:
        uneven = [n for n in names if QK.match(n) and tensors[n].shape[0] % hd]
        if uneven:
            problems.append(f"head_dim {hd} does not divide the rows of {short_list(uneven, 6, 200, quote=False)}")
    # convert copies dtypes as they are: one assemble() refuses would be written faithfully and refused at load
    before = proposed_fit(found)
    problems += [f"{line}: assemble() would refuse it in any layout; store it as the model expects"
                 for line in (before.refused if before else ())]
    if problems:
        raise ConvertError(f"{short_text(src, 300)} cannot be written as {to}:\n  " + "\n  ".join(problems))
    perm = rope_permutation(hd, rope, order)
    written = {}
    for canon, t in tensors.items():
        if QK.match(canon) and order != rope:
            t = permute_rows(t, hd, perm)
        written[layout.rules.from_canonical(canon)] = t
    if len(written) != len(tensors):
        raise ConvertError(f"the {to} layout's rules map two tensors to one name")
    facts["num_hidden_layers"] = n_layers or facts.get("num_hidden_layers")
    facts.pop("rope_interleave", None)
    if holds_any_key and (rope != "neox" or order != "neox"):  # say the order where it is not Llama's
        facts["rope_interleave"] = order == "interleaved"
    style, src_style = STYLES[layout.config], style_of(src, found.config)
    config = from_facts(facts, style)
    # hf norm_output=true is SpecForge's "head", but vLLM / TensorRT-LLM read it as EAGLE 3.1's fed-back norm; an
    # absent key is "head" to all of them: written only where the source config itself said it, in this style
    if style.unsaid is not None and facts.get("norm_output") == style.unsaid and not (
            src_style is style and to_facts(found.config, src_style).get("norm_output") == style.unsaid):
        config.pop("norm_output", None)
    try:
        (out / style.file).write_text(json.dumps(config, indent=2) + "\n")
        save_safetensors(written, out, layout.weights)
    except (OSError, SafetensorError) as e:   # a full or read-only disk: said, and what was written removed
        why = getattr(e, "strerror", None) or short_text(str(e), 300)
        raise ConvertError(f"cannot write into {short_text(out, 300)}: {why}") from None
    verify(out, facts, {c: (permute_rows(t, hd, perm) if QK.match(c) and order != rope else t)
                        for c, t in tensors.items()}, to, before=before)
    return config


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Byte for byte, as a conversion copies: a NaN reads back as the same NaN (torch.equal says it does not)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.contiguous().view(-1).view(torch.uint8),
                                                                      b.contiguous().view(-1).view(torch.uint8))


def verify(out: Path, facts: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], to: str,
           before: Fit | None = None) -> None:
    """Read the written checkpoint back as any user would (detection, its spec's rules, its config style) and
    compare: a layout that cannot say a fact (e.g. EAGLE 3.1's norm_output in a flat Llama config whose family does
    not imply it) is refused here (convert() then removes the output), never left to load wrong. With ``before``
    (the source's fit), also the tensor names the written draft's proposed spec would refuse and the source's did
    not (:func:`draftsmith.convert.fits.introduced_misfits`)."""
    written = inspect_checkpoint(out)
    try:
        got, got_facts, _, _ = read_canonical(out, written)
    except ConvertError:
        got, got_facts = {}, {}
    diff = sorted(k for k in {*facts, *got_facts} if facts.get(k) != got_facts.get(k))
    bad = sorted(k for k in {*tensors, *got} if k not in got or k not in tensors or not same_bits(tensors[k], got[k]))
    # as assemble() would see it: names the written draft's spec refuses and the source's did not
    misfits = [] if diff or bad or before is None else introduced_misfits(before, written)
    if diff or bad or misfits:   # convert() removes what was written (and only folders it created)
        what = [f"{short_text(k, 200)}: {short(facts.get(k))} would read back as {short(got_facts.get(k))}"
                for k in diff[:6]]
        what += [f"tensor {short_text(k, 200)} would not read back" for k in bad[:6]]
        what += [f"its spec would refuse it: {m}" for m in misfits[:6]]
        if (more := sum(max(len(found) - 6, 0) for found in (diff, bad, misfits))) > 0:
            what.append(f"... and {more} more")
        raise ConvertError(f"the {to} layout cannot express this draft (nothing written):\n  " + "\n  ".join(what))
