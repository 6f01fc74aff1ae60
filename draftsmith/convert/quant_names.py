"""The module names a draft config's ``quantization_config`` states, moved with the tensors when ``convert`` renames
them: compressed-tensors' ``ignore`` and config groups' ``targets`` (a name, or ``re:`` and a regex matched from the
start), FineGrainedFP8's ``modules_to_not_convert`` (a name, matched as a part of module names). Copied unchanged,
an ignore list names modules the result does not hold (``midlayer.self_attn.o_proj`` after ``midlayer.*`` ->
``layers.0.*``) and an engine that matches it quantizes the float linear it names (FORMATS.md: vLLM PR 49900)."""
from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any


def _lists(qc: Mapping[str, Any]) -> list[tuple[str, list, Callable[[str, str], bool]]]:
    """(where, the list, how an entry that names no module exactly is matched) of each name list ``qc`` holds."""
    def compressed(entry: str, module: str) -> bool:
        return entry.startswith("re:") and re.match(entry[3:], module) is not None   # re.error: said by the caller

    found = []
    if isinstance(qc.get("ignore"), list):
        found.append(("quantization_config.ignore", qc["ignore"], compressed))
    groups = qc.get("config_groups")
    for name, group in (groups.items() if isinstance(groups, Mapping) else ()):
        if isinstance(group, Mapping) and isinstance(group.get("targets"), list):
            found.append((f"quantization_config.config_groups.{name}.targets", group["targets"], compressed))
    if isinstance(qc.get("modules_to_not_convert"), list):
        found.append(("quantization_config.modules_to_not_convert", qc["modules_to_not_convert"],
                      lambda entry, module: entry in module))
    return found


def moved_quant_names(qc: Any, moved: Mapping[str, str | tuple[str, ...]]) -> tuple[Any, list[str]]:
    """``qc`` with every entry naming a module of the source (a key of ``moved``: source module -> the result's,
    or the result's modules in row order where convert writes a fused one's parts apart) renamed, and the problems
    of the entries that match modules by pattern and would match others in the result (said, never rewritten: a
    pattern's intent is not a name's). Entries that name no module of the draft (a class such as ``Linear``, the
    target's ``lm_head``) stay as they are."""
    if not isinstance(qc, Mapping):
        return qc, []
    out, problems = copy.deepcopy(dict(qc)), []
    names = {m: (new,) if isinstance(new, str) else tuple(new) for m, new in moved.items()}
    for where, entries, matches in _lists(out):
        kept = []
        for i, entry in enumerate(entries):
            kept.append(entry)
            if not isinstance(entry, str):
                continue
            if entry in names:   # a fused module: each of its parts
                kept[-1:] = names[entry]
                continue
            try:
                before = {new for m in names if matches(entry, m) for new in names[m]}
                after = {new for news in names.values() for new in news if matches(entry, new)}
            except re.error as e:   # an engine would refuse it as well: said, not rewritten
                problems.append(f"{where}[{i}] {entry!r} is no regex ({e}): correct it in the source's config")
                continue
            if before != after:
                problems.append(f"{where}[{i}] {entry!r} matches {len(before)} of the draft's modules before the "
                                f"renaming and {len(after)} after (e.g. {sorted(before ^ after)[0]!r}): state it for "
                                "the result's names in the source's config, or remove it")
        entries[:] = kept
    return out, problems
