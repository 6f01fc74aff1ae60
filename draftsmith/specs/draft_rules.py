"""Cross-field rules of a spec's draft section: settings that contradict each other whatever the checkpoints hold.

Phase 2 (:func:`draft_problems`, from specs.resolve) reports those the spec alone decides, with every other problem
of the file at once; the draft's build (assembler.build) reports the same problems where a draft config or the
checkpoint's tensors decide them (``vocab.reduced: auto`` that finds d2t, a ``norm_output`` read from the config, a
plugin fusion that does not say what it holds). One builder per problem, so both say it alike.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from draftsmith.errors import Problem
from draftsmith.hooks.records import HIDDEN_NORM
from draftsmith.registry import Registry
from draftsmith.specs.schema import Draft, Norms, Share, Vocab


def hidden_norm_problem(fusion: str) -> Problem:
    return Problem("draft.norms.hidden", f"true: fusion {fusion!r} has no hidden-norm slot (its first layer reads the "
                   "fused state alone, not a hidden state beside the embedding)", found=True, allowed="auto or false")


def final_norm_problem(asks: list[str]) -> Problem:
    """``asks``: who feeds the final norm's output back (``draft.feed_back: post_norm``, a norm_output)."""
    return Problem("draft.norms.final", f"false, but {' and '.join(asks)} feeds the final norm's output back to the "
                   "next draft step; without a final norm that is the pre-norm state", found=False,
                   allowed="true (a final norm), or pre-norm feedback", hint="Set norms.final: true, or feed back "
                   "the pre-norm state (feed_back: pre_norm and the fusion's norm_output: head or none).")


def shared_head_problem(why: str) -> Problem:
    """``why``: what makes the draft's vocabulary reduced."""
    return Problem("draft.share.lm_head", f"target: the draft's vocabulary is reduced ({why}), and the target's head "
                   "ranks all of the target's ids", found="target",
                   allowed="draft (the draft's own lm_head.weight over its reduced vocabulary)",
                   hint="Or set draft.vocab.reduced: false for a draft that drafts over the target's whole vocabulary.")


def _field(section: Any, model: type, name: str) -> Any:
    """The raw value of ``name`` in a section (the schema's default where the section leaves it out; None where
    the section is no mapping: phase 1 reports that)."""
    if section is None:
        section = {}
    return section.get(name, model.model_fields[name].default) if isinstance(section, Mapping) else None


def draft_problems(data: Mapping[str, Any], registry: Registry) -> list[Problem]:
    """The contradictions the spec's own draft settings make (values of the wrong type are phase 1's to report)."""
    draft = data.get("draft")
    if not isinstance(draft, Mapping):
        return []
    norms, fusion = draft.get("norms"), draft.get("fusion")
    out = []
    kind = fusion.get("kind") if isinstance(fusion, Mapping) else None
    if _field(norms, Norms, "hidden") is True and isinstance(kind, str) and ("fusion", kind) in registry.components:
        params = {k: v for k, v in fusion.items() if k != "kind"}
        if HIDDEN_NORM not in registry.holds("fusion", kind, params, (HIDDEN_NORM,)):   # a fusion that says so
            out.append(hidden_norm_problem(kind))
    if _field(norms, Norms, "final") is False:
        asks = ["draft.feed_back: post_norm"] if _field(draft, Draft, "feed_back") == "post_norm" else []
        if isinstance(fusion, Mapping) and fusion.get("norm_output") == "feed_back":
            asks.append("the spec's norm_output, read as feed_back")
        if asks:
            out.append(final_norm_problem(asks))
    reduced, head = _field(draft.get("vocab"), Vocab, "reduced"), _field(draft.get("share"), Share, "lm_head")
    if reduced is True and head == "target":
        out.append(shared_head_problem("draft.vocab.reduced: true"))
    return out
