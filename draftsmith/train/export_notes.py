"""The notes a finished training run logs about the draft it wrote, where its files cannot say how it was trained to
every reader: a fed-back final norm a flat config has no key for (:func:`unstated`), aux ids stated as layer outputs
(:func:`output_ids_note`), tensors kept under their canonical names for want of an inverse rename
(:func:`canonical_kept`). Each is None where there is nothing to say; the draft's config.json and its tensors' names
(its safetensors header) are read once for all of a run's notes, by the first that needs them (:func:`draft_config`,
:func:`draft_names`)."""
from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from draftsmith.assembler.build import rule_set
from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.components.patterns import GROUP_REF
from draftsmith.registry import default_registry
from draftsmith.train.draft_io import tap_convention, trained_norm_output


def draft_config(folder: Path) -> Callable[[], dict[str, Any]]:
    """``folder``'s config.json as a dict, read at the first call and kept for the next ones."""
    return functools.cache(lambda: json.loads((Path(folder) / "config.json").read_text()))


def draft_names(folder: Path) -> Callable[[], list[str]]:
    """``folder``'s tensor names (its header alone), read at the first call and kept for the next ones."""
    return functools.cache(lambda: list(list_tensors(folder)))


def unstated(model, folder: Path, spec_name: str, config: Callable[[], dict[str, Any]] | None = None,
             listed: Callable[[], list[str]] | None = None) -> str | None:
    """A note when the draft's config.json in ``folder`` cannot state how it was trained to every reader: a fed-back
    final norm (``norm_output: feed_back``) is an absent ``norm_output`` in a flat config, which vLLM reads as the
    head's norm only (its ``true`` is the fed-back norm, SpecForge's and draftsmith's the head's), and so does a load
    without the spec unless the family detected reads absence as feed_back (EAGLE 3.1, by its per-aux ``fc_norm``:
    :func:`draftsmith.convert.layouts.absent_reads`); the speculators layout states it for every reader.
    ``config``: the :func:`draft_config` of ``folder`` (None: one of its own); ``listed``: its :func:`draft_names`."""
    from draftsmith.components.eagle3_config import is_speculators_config
    from draftsmith.convert.layouts import absent_reads

    if trained_norm_output(model.draft) != "feed_back":   # draft.feed_back: post_norm's too
        return None
    read = config or draft_config(folder)
    config = read()
    if is_speculators_config(config):
        return None
    names = (listed or draft_names(folder))()   # the names alone, from the header
    # read with the spec, unless the family detected reads the absent key as feed_back: a layout detection does not
    # know (the spec's own names), or one whose family reads it as the head's norm (convert would state that)
    detected = absent_reads({k: v for k, v in config.items() if k != "norm_output"}, names) == "feed_back" and \
        output_ids_note(model, folder, spec_name, read) is None   # ids stated as outputs: read without the spec, wrong
    read_with = "" if detected and default_registry().detect_layout(config, names) is not None else \
        f" --spec {spec_name}"
    vllm = f"for vLLM, write it with `draftsmith convert {folder}{read_with} --to speculators OUT`"
    if detected:
        return (f"note: the draft in {folder} feeds the final norm's output back (norm_output: feed_back); its flat "
                "config.json leaves norm_output out, which draftsmith reads back as trained (the family detected by "
                "its per-aux fc_norm) but vLLM reads as the head's norm only (it would feed back the pre-norm state "
                f"and accept less): {vllm}")
    return (f"note: the draft in {folder} feeds the final norm's output back (norm_output: feed_back), which its "
            f"flat config.json cannot state; load it with --spec {spec_name}: read without the spec (generate "
            f"--draft, inspect) or by vLLM it feeds back the pre-norm state and accepts less; {vllm}")


def output_ids_note(model, folder: Path, spec_name: str,
                    config: Callable[[], dict[str, Any]] | None = None) -> str | None:
    """A note when the draft's config.json in ``folder`` states its aux ids as layer outputs (the spec's
    ``aux_layers.at: output``, as :func:`with_ids` writes them so that the spec reads them back as trained): a load
    without the spec (generate --draft, inspect, doctor) and vLLM read them as layer inputs, one layer early;
    ``convert --spec`` writes them as the inputs they tap. ``config``: as :func:`unstated`'s."""
    from draftsmith.components.eagle3_config import KEY
    from draftsmith.assembler.config import flatten_draft_config

    if not getattr(model.draft, "taps", None) or tap_convention(model.spec) != "output":
        return None
    flat = flatten_draft_config((config or draft_config(folder))())
    ids = flat.get(KEY) or (flat.get("eagle_config") or {}).get(KEY)
    if not ids:   # the default layers, left out: every reader takes their inputs
        return None
    return (f"note: the draft in {folder} states its aux ids {ids} as layer outputs (aux_layers.at: output): load "
            f"it with --spec {spec_name}; read without it (generate --draft, inspect) or by vLLM they are layer "
            f"inputs, one layer early; for vLLM, write it with `draftsmith convert {folder} --spec {spec_name} --to "
            "speculators OUT`, which states them as the inputs they tap")


def _makes(rules) -> dict[int, re.Pattern]:
    """For each rename, a pattern of the names it makes (its replacement, a group standing for any text); none for
    one that begins with no text of its own ('^model\\.' -> '', '\\1.'): its names are not told from any other."""
    out = {}
    for i, rule in enumerate(rules.rules):
        replace = getattr(rule, "replace", None)
        if isinstance(replace, str) and replace and not replace.startswith("\\"):
            out[i] = re.compile("^" + ".+?".join(map(re.escape, GROUP_REF.split(replace))))
    return out


def _unwritten(rule, name: str) -> bool:
    """Whether ``rule`` cannot write ``name`` back: it has no inverse, or one that does not match it (a typo)."""
    return rule.inverse is None or rule.invert(name) is None


def canonical_kept(model, folder: Path, listed: Callable[[], list[str]] | None = None) -> str | None:
    """A note when tensors in ``folder`` were written under their canonical names because the rename that reads them
    has no inverse to write the spec's own names back (``'^blocks\\.(\\d+)\\.ffn\\.' -> 'layers.\\1.mlp.'``: its
    layers.0.mlp.* beside the renamed fusion.*), or one that does not match them (``'^layers\\.(\\d+)\\.hiden_norm'``
    for 'layers.\\1.hidden_norm.'): the spec reads both, a reader of one naming does not; None else. ``listed``: as
    :func:`unstated`'s."""
    from draftsmith.assembler.names import one_pattern

    rules = rule_set(model.spec, default_registry())
    made = _makes(rules)
    if not made or not (Path(folder) / "model.safetensors").is_file():   # nothing written (an evaluation alone)
        return None
    names = (listed or draft_names(folder))()
    unread = [n for n in names if rules.to_canonical(n) == (n, None)]   # under a canonical name
    lost = {i: [n for n in unread if m.match(n) and _unwritten(rules.rules[i], n)] for i, m in made.items()}
    kept = [n for n in unread if any(n in names for names in lost.values())]
    if not kept:
        return None
    makers = [i for i, names in lost.items() if names]
    said = "; ".join(rules.describe(i) for i in makers[:3]) + (" and more" if len(makers) > 3 else "")
    stated = [i for i in makers if rules.rules[i].inverse is not None]
    why = ("no inverse to write the spec's own names" if not stated else "an inverse that does not match the names "
           "it makes" if len(stated) == len(makers) else "no inverse, or one that does not match the names it makes")
    fix = "state" if not stated else "state (or correct)"
    return (f"note: {len(kept)} tensor(s) in {folder} are written under their canonical names ({one_pattern(kept)}): "
            f"{said} {'has' if len(makers) == 1 else 'have'} {why} (the spec reads both); {fix} `inverse: [match, "
            "replace]` on such a rule to write one naming")
