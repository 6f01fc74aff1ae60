"""What a draft reads as: its tensors under canonical names (the rules of the spec ``inspect`` detects) and its
config facts, planned from the config and tensor headers before a tensor is read; the refusals every convert step
shares (:class:`ConvertError`), and the bit-for-bit comparison a conversion's copies answer to."""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from draftsmith.assembler.checkpoint import read_tensors
from draftsmith import limits
from draftsmith.errors import DraftsmithError, short, short_text
from draftsmith.components.eagle3_config import as_inputs, drafted_norm_output
from draftsmith.components.eagle3_keys import LAST_NORM
from draftsmith.components.weights import RuleSet
from draftsmith.convert.inspect import Inspection, inspect_checkpoint
from draftsmith.convert.unfuse import cut, part_shape, read_mapping
from draftsmith.assembler.styles import style_of, to_facts
from draftsmith.assembler.vocab import as_offsets

RESOLVED = ("norm_before_residual", "fc_norm", "norm_before_fc", "norm_output")


class ConvertError(DraftsmithError, ValueError):
    """A checkpoint the target layout cannot express, or a place it cannot be written."""


@dataclass(frozen=True)
class Canonical:
    """What a draft reads as, from its config and tensor headers alone: nothing here reads tensor data."""
    found: Inspection
    sources: dict[str, str]                 # canonical name -> checkpoint name (the draft's own, then carried ones)
    shapes: dict[str, tuple[int, ...]]      # canonical name -> shape, from the headers
    facts: dict[str, Any]
    rope: str
    spec: str                               # the detected family spec
    carried: frozenset[str] = frozenset()   # canonical names of tensors the spec ignores (frozen copies), carried
    # canonical name -> [start, stop) rows of its fused checkpoint tensor (a split rule's part, sized as the load plan
    # sizes it: convert/unfuse.py); a part absent here (a per-tensor FP8 scale every part shares) takes it whole
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)


def proposed_spec(found: Inspection):
    """The spec inspect proposes for the draft (its family's, with the weight rules the stored scales need: Mistral's
    ``qscale_weight`` read as ``weight_scale``), which names its tensors canonically; the family spec itself where
    the proposal does not parse."""
    from draftsmith.errors import DraftsmithError
    from draftsmith.specs.loader import load_spec, parse_spec

    try:
        return parse_spec(found.spec, source=f"the spec inspect proposes for {short_text(found.folder, 300)}")
    except DraftsmithError:
        return found.given or load_spec(found.match.spec)


def plan_canonical(folder: str | Path, found: Inspection | None = None) -> Canonical:
    """The canonical names, config facts and rope order of a draft checkpoint, read from its config and headers."""
    from draftsmith.assembler.build import rule_set
    from draftsmith.assembler.config import flatten_draft_config
    from draftsmith.registry import default_registry

    found = found or inspect_checkpoint(folder)
    if found.match is None:
        where = short_text(folder, 300)
        raise ConvertError(f"{where}: not a layout draftsmith recognises; run `draftsmith inspect {where}`")
    rules = rule_set(proposed_spec(found), default_registry(), flatten_draft_config(found.config))
    mapping, rows = read_mapping(found, rules, [n for n in found.infos if not rules.is_ignored(n)])
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
    if "norm_output" in facts:   # draft.feed_back: post_norm is said as the config says feed_back
        facts["norm_output"] = drafted_norm_output(facts["norm_output"], found.spec["draft"].get("feed_back", ""))
        agreed = {LAST_NORM: facts["norm_output"] != "none"}   # Model-Optimizer's flag says what the spec resolved
        facts |= agreed if LAST_NORM in facts else {}
        if isinstance(inner := facts.get("eagle_config"), Mapping) and LAST_NORM in inner:
            facts["eagle_config"] = {**inner, **agreed}
    if "bias" in fusion:   # a fusion with a bias setting (EAGLE-1's fc): whether it has one is the tensors' to say,
        facts["bias"] = "fc.bias" in sources   # and stated (EAGLE's reference reads a missing key as true)
    if isinstance(fusion.get("aux_layers"), Mapping) and fusion["aux_layers"].get("ids"):
        # as layer inputs, the convention of every layout's reader
        facts["eagle_aux_hidden_state_layer_ids"] = as_inputs(fusion["aux_layers"]["ids"],
                                                              fusion["aux_layers"].get("at", "input"))
    rope = found.spec["draft"]["attention"].get("rope", "neox")
    shapes = {canon: part_shape(tuple(found.infos[src].shape), rows.get(canon)) for canon, src in sources.items()}
    carried = frozenset(canon for canon, src in sources.items() if rules.is_ignored(src))
    return Canonical(found, sources, shapes, facts, rope, found.match.spec, carried, rows)


def read_canonical(folder: str | Path, found: Inspection | None = None, *, plan: Canonical | None = None
                   ) -> tuple[dict[str, torch.Tensor], dict[str, Any], str, str]:
    """(canonical tensors, config facts, source rope order, detected spec) of a draft checkpoint; ``found``: its
    inspection, ``plan`` its :func:`plan_canonical`, when the caller made them already."""
    plan = plan_canonical(folder, found) if plan is None else plan
    read = Counter(plan.sources.values())   # a fused tensor is read once; each part takes its rows, as its own
    data = read_tensors(plan.found.infos, list(read), finite=True)   # NaN/inf: no load takes it
    tensors = {canon: cut(data[src], plan.rows.get(canon), read[src] > 1) for canon, src in plan.sources.items()}
    if "d2t" in tensors:   # canonical d2t holds offsets, the published convention every layout (and vLLM) reads
        tensors["d2t"] = as_offsets(tensors["d2t"], plan.found.spec["draft"].get("vocab", {}).get("d2t", "offset"))
    return tensors, dict(plan.facts), plan.rope, plan.spec


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


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Byte for byte, as a conversion copies: a NaN reads back as the same NaN (torch.equal says it does not)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.contiguous().view(-1).view(torch.uint8),
                                                                      b.contiguous().view(-1).view(torch.uint8))
