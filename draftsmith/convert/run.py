"""``draftsmith convert DIR --to LAYOUT OUT``: read a draft through the rules of the spec ``inspect`` detects, into
canonical names and config facts; write them through the target layout's inverted rules and config style.

Tensors are copied bit for bit; the only data change is the q/k row permutation between rotary pair orders
(interleaved <-> neox, within each head), which is exact, so a round trip is the identity. Everything that sits on
those rows moves with them: q/k biases, per-channel FP8 scales, block scales where every block keeps one scale (else
refused: no block scale can say it), and the q_norm / k_norm vectors (draftsmith norms each head before rotating it,
so the norm's weight is per rotary dim); a tensor on the rows convert does not know how to reorder is refused.
What the names, shapes and config refuse is refused before a tensor is read.
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
from draftsmith.errors import DraftsmithError, OptionError, short, short_list, short_text
from draftsmith.options import utf8_problem
from draftsmith.components.weights import RegexRule, RuleSet
from draftsmith.convert.fits import Fit, fit, introduced_misfits, proposed_fit
from draftsmith.convert.inspect import Inspection, inspect_checkpoint
from draftsmith.assembler.styles import STYLES, style_of, to_facts, from_facts

LAYOUTS_FILE = Path(__file__).parent / "layouts.yaml"
RESOLVED = ("norm_before_residual", "fc_norm", "norm_before_fc", "norm_output")
MLA_ROPE = re.compile(r"^layers\.\d+\.self_attn\.(q_b_proj|kv_a_proj_with_mqa)\.")   # rope rows inside, per head
ATTENTION = re.compile(r"^(?P<prefix>layers\.\d+\.self_attn)\.(?P<module>[^.]+)\.(?P<part>.+)$")
NOT_ROTATED = ("v_proj", "o_proj", "rotary_emb")   # rows the rotary order does not touch (inv_freq: one per pair)
MLA_MODULES = ("q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj")
ROW_SCALES = ("weight_scale", "qscale_weight")     # FP8 weight scales: [1] per tensor or one per output row


class ConvertError(DraftsmithError, ValueError):
    """A checkpoint the target layout cannot express, or a place it cannot be written."""


class UnknownLayout(OptionError, ConvertError):
    """A ``--to`` that names no layout: a bad option value (exit 2), still a ConvertError to a caller."""


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


def permute_block_scale(scale: torch.Tensor, rows: int, head_dim: int, perm: torch.Tensor,
                        block_rows: int) -> torch.Tensor | None:
    """The block scales [ceil(rows / block_rows), ...] of a weight whose rows :func:`permute_rows` reorders, or None
    where none can say it exactly: a new block gathers rows from old blocks, which must then hold the same scales
    (a block holding whole heads keeps its own; a head split over blocks mixes them)."""
    src = permute_rows(torch.arange(rows), head_dim, perm)          # new row r holds old row src[r]
    new_block, old_block = torch.arange(rows) // block_rows, src // block_rows
    out = scale.clone()
    for block in range(scale.shape[0]):
        first, *rest = old_block[new_block == block].unique().tolist()
        if any(not same_bits(scale[o], scale[first]) for o in rest):
            return None
        out[block] = scale[first]
    return out


def reorder_heads(t: torch.Tensor, head_dim: int, src: str, dst: str) -> torch.Tensor:
    """``t``'s rows within each head from ``src`` pair order to ``dst``, by the definition of the two orders (verify's
    expectation, computed apart from :func:`rope_permutation`): interleaved pairs are (2i, 2i+1), neox (i, i + d/2)."""
    if src == dst:
        return t
    heads = t.reshape(-1, head_dim, *t.shape[1:])
    if (src, dst) == ("interleaved", "neox"):
        return torch.cat([heads[:, 0::2], heads[:, 1::2]], 1).reshape(t.shape)
    half = head_dim // 2
    return torch.stack([heads[:, :half], heads[:, half:]], 2).reshape(t.shape)


@dataclass(frozen=True)
class Canonical:
    """What a draft reads as, from its config and tensor headers alone: nothing here reads tensor data."""
    found: Inspection
    sources: dict[str, str]                 # canonical name -> checkpoint name (the draft's own, then carried ones)
    shapes: dict[str, tuple[int, ...]]      # canonical name -> shape, from the headers
    facts: dict[str, Any]
    rope: str
    spec: str                               # the detected family spec


def plan_canonical(folder: str | Path, found: Inspection | None = None) -> Canonical:
    """The canonical names, config facts and rope order of a draft checkpoint, read from its config and headers."""
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
    sources = {canon: src for canon, (src, _) in mapping.items()}
    renamed = RuleSet(rules.rules)   # the same rules, ignoring nothing: an ignored tensor's canonical name
    for n in (n for n in found.infos if rules.is_ignored(n)):
        canon = renamed.to_canonical(n)[0]
        name = n if canon in sources else canon   # never over a tensor the draft itself holds
        if name in sources:
            raise ConvertError(
                f"{short_text(folder, 300)}: {n!r}, which the {found.match.spec} rules ignore, would be carried as "
                f"{name!r}, the name of the draft's own {sources[name]!r}; convert writes neither over the other")
        sources[name] = n
    # e.g. a frozen embed copy, carried along: model.embed_tokens.weight (NeMo) is embed_tokens.weight elsewhere
    fusion = found.spec["draft"]["fusion"]
    facts |= {k: fusion[k] for k in RESOLVED if k in fusion}  # every flag stated, as the spec resolved it
    if isinstance(fusion.get("aux_layers"), Mapping) and fusion["aux_layers"].get("ids"):
        facts["eagle_aux_hidden_state_layer_ids"] = list(fusion["aux_layers"]["ids"])
    rope = found.spec["draft"]["attention"].get("rope", "neox")
    shapes = {canon: tuple(found.infos[src].shape) for canon, src in sources.items()}
    return Canonical(found, sources, shapes, facts, rope, found.match.spec)


def read_canonical(folder: str | Path, found: Inspection | None = None
                   ) -> tuple[dict[str, torch.Tensor], dict[str, Any], str, str]:
    """(canonical tensors, config facts, source rope order, detected spec) of a draft checkpoint; ``found``: its
    inspection, when the caller made it already."""
    plan = plan_canonical(folder, found)
    data = read_tensors(plan.found.infos, list(plan.sources.values()))
    tensors = {canon: data[src] for canon, src in plan.sources.items()}
    if plan.found.spec["draft"].get("vocab", {}).get("d2t") == "absolute" and "d2t" in tensors:
        d2t = tensors["d2t"]   # canonical d2t holds offsets, the published convention every layout (and vLLM) reads
        tensors["d2t"] = d2t - torch.arange(d2t.shape[0], dtype=d2t.dtype)
    return tensors, dict(plan.facts), plan.rope, plan.spec


def writable_kinds(table: Mapping[str, Layout]) -> set[str]:
    """The fusion kinds the layouts' own specs hold (EAGLE-1 and EAGLE-3): what convert can write."""
    from draftsmith.specs.loader import load_spec

    return {load_spec(layout.spec).draft.fusion.kind for layout in table.values()}


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
            f"({', '.join(table)}) hold drafts of fusion kind {' or '.join(sorted(kinds))} only, so there is nothing "
            f"to convert it into: load it as it is (--spec {family})")


def scale_block(found: Inspection) -> tuple[int, int] | None:
    """The FP8 scale block (rows, columns) the proposed spec reads (its quant.block), or None when it reads none."""
    quant = (found.spec or {}).get("quant") or {}
    block = quant.get("block")
    if quant.get("method") == "fp8" and quant.get("scheme") == "block" and isinstance(block, (list, tuple)):
        return int(block[0]), int(block[1])
    return None


def rotated(shapes: Mapping[str, tuple[int, ...]], hd: int, rows_per_block: int | None
            ) -> tuple[dict[str, str], list[str]]:
    """From names and shapes alone: how each tensor on the rotated q/k rows follows a change of pair order ('rows':
    its rows are reordered as the weight's; 'block': a block scale, reordered if its data allows; 'keep': one value
    for the whole tensor), and the problems (a tensor convert does not know how to reorder, rows head_dim does not
    divide, a block scale of another shape than its block size gives)."""
    how, problems = {}, []
    for name, shape in shapes.items():
        m = ATTENTION.match(name)
        if m is None or m["module"] in NOT_ROTATED or m["module"] in MLA_MODULES:   # MLA: refused on its own
            continue
        module, part = m["module"], m["part"]
        weight = shapes.get(f"{m['prefix']}.{module}.weight")
        rows = weight[0] if weight else None
        size = 1
        for n in shape:
            size *= n
        if module in ("q_norm", "k_norm", "q_proj", "k_proj") and part in ("weight", "bias"):
            how[name] = "rows"
        elif module in ("q_proj", "k_proj") and size == 1:
            how[name] = "keep"    # a per-tensor scale (weight_scale, input_scale, qscale_act): no rows
        elif module in ("q_proj", "k_proj") and part in ROW_SCALES and shape and shape[0] == rows:
            how[name] = "rows"    # per channel
        elif module in ("q_proj", "k_proj") and part == "weight_scale_inv" and len(shape) == 2 and rows:
            if rows_per_block is None or shape[0] != -(-rows // rows_per_block):
                problems.append(f"{name} {list(shape)}: FP8 block scales whose block size the spec does not give "
                                f"for {rows} rows; convert cannot reorder their rows")
                continue
            how[name] = "block"
        else:
            problems.append(f"{name} {list(shape)} sits on the rotated q/k rows, and convert does not know how to "
                            f"reorder it")
            continue
        if how[name] == "rows" and (not shape or shape[0] % hd):
            problems.append(f"head_dim {hd} does not divide the rows of {name} {list(shape)}")
    return how, problems


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
    if to not in table:   # a bad option value (exit 2), before anything is read or created
        raise UnknownLayout(f"unknown layout {short(to)}; known: {', '.join(table)}")
    out = Path(out)
    created = make_out(out)   # before a tensor is read: a place that cannot be written is refused first
    try:
        return _convert(src, table[to], out, table)
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


def _convert(src: str | Path, layout: Layout, out: Path,
             table: Mapping[str, Layout] | None = None) -> dict[str, Any]:
    to = layout.name
    found = inspect_checkpoint(src)   # once: the reading, the dtype check and verify's misfits all use it
    check_family(src, found, table or layouts())
    plan = plan_canonical(src, found)  # names, shapes and facts: every check below reads no tensor data
    names, rope = list(plan.sources), plan.rope
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
    problems += [f"{line}: assemble() would refuse it in any layout; store it as the model expects"
                 for line in (before.refused if before else ())]
    refused = f"{short_text(src, 300)} cannot be written as {to}:\n  "
    if problems:
        raise ConvertError(refused + "\n  ".join(problems))
    tensors, facts, rope, _ = read_canonical(src, found)
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
    verify(out, facts, expected, to, before=before, source=tensors, orders=(rope, order), block=block)
    return config


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Byte for byte, as a conversion copies: a NaN reads back as the same NaN (torch.equal says it does not)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.contiguous().view(-1).view(torch.uint8),
                                                                      b.contiguous().view(-1).view(torch.uint8))


def verify(out: Path, facts: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], to: str,
           before: Fit | None = None, source: Mapping[str, torch.Tensor] | None = None,
           orders: tuple[str, str] = ("neox", "neox"), block: tuple[int, int] | None = None) -> None:
    """Read the written checkpoint back as any user would (detection, its spec's rules, its config style) and
    compare: a layout that cannot say a fact (e.g. EAGLE 3.1's norm_output in a flat Llama config whose family does
    not imply it) is refused here (convert() then removes the output), never left to load wrong. With ``before``
    (the source's fit), also the tensor names the written draft's proposed spec would refuse and the source's did
    not (:func:`draftsmith.convert.fits.introduced_misfits`). With ``source`` (the source's canonical tensors) and
    ``orders`` (its rotary order, the written one), also against an expectation computed apart from the writing:
    each tensor the source's bit for bit, except the rotated q/k rows, whose dequantized values (``block``: the FP8
    scale block, rows x columns) must be the source's reordered by :func:`reorder_heads`."""
    written = inspect_checkpoint(out)
    try:
        got, got_facts, _, _ = read_canonical(out, written)
    except ConvertError:
        got, got_facts = {}, {}
    diff = sorted(k for k in {*facts, *got_facts} if facts.get(k) != got_facts.get(k))
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
        raise ConvertError(f"the {to} layout cannot express this draft (nothing written):\n  " + "\n  ".join(what))


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


def loading_line(out: str | Path) -> str:
    """What loads a written draft, as convert's last line says it: the spec detection proposes for it (what
    ``generate --draft`` without --spec takes, and ``draftsmith inspect OUT`` prints), named by its family where
    that built-in spec alone reads it the same (its ``auto`` values are read from the same config), else the values
    the family spec lacks."""
    from draftsmith.specs.loader import load_spec

    where = short_text(out, 300)
    found = inspect_checkpoint(out)
    if found.match is None:
        return f"detection finds no layout in it: `draftsmith inspect {where}` says why"
    family = found.match.spec
    judged = fit(found.folder, found.spec)
    if judged is not None and judged.misfits:   # e.g. q_norm / k_norm, which detection does not read
        names = short_list(sorted(judged.misfits), 4, 200)
        return (f"the spec detection proposes ({family}) does not load it as it is ({names}: "
                f"{', '.join(sorted(set(judged.misfits.values())))}); start from `draftsmith inspect {where}`")
    lacks = _spec_differences(found.spec, load_spec(family).model_dump(mode="json"))
    if not lacks:
        return f"load it with spec {family} (or omit --spec: generate --draft detects it)"
    shown = ", ".join(f"{path}: {short(value, 80)}" for path, value in lacks[:4]) + (", ..." if len(lacks) > 4 else "")
    return (f"omit --spec: generate --draft detects it (spec {family} with {shown}, as `draftsmith inspect {where}` "
            f"prints); spec {family} alone does not load it")


def _spec_differences(proposed: Any, family: Any, path: str = "") -> list[tuple[str, Any]]:
    """(dotted path, proposed value) where the proposed spec says what the family spec does not; the name and the
    checkpoint folder are not differences, nor a family value of auto (read from the same config), nor an aux ids
    list the family leaves to the config (inspect read it there)."""
    if path in ("name", "checkpoints") or family == "auto":
        return []
    if path == "draft.fusion.aux_layers.ids" and family is None:
        return []
    if isinstance(proposed, Mapping) and isinstance(family, Mapping):
        return [d for k in (*proposed, *(k for k in family if k not in proposed))
                for d in _spec_differences(proposed.get(k), family.get(k), f"{path}.{k}" if path else k)]
    return [] if proposed == family else [(path, proposed)]
