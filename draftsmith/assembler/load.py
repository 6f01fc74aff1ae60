"""Meta, plan, check, assign: load a checkpoint folder into a module built on the meta device.

Planning and filling are separate steps so a caller loading several modules (target and draft) can check every
checkpoint before reading any tensor data: a broken draft is reported before a large target is read.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from draftsmith.assembler.checkpoint import FLOAT4, TensorInfo, list_tensors, nonfinite, read_tensors, unlisted
from draftsmith.assembler.plan import CheckpointMismatch, Expected, LoadPlan, expected_of, plan_load
from draftsmith.components.moe import kept_dtypes
from draftsmith.components.quant_models import scale_faults, set_compute_dtype, stored_dtypes
from draftsmith.components.weights import RuleSet
from draftsmith.errors import CheckpointError, short, short_list
from draftsmith.registry.results import ComponentFailed, made_by


@dataclass(frozen=True)
class PlannedLoad:
    """A module on meta and the checked plan that fills it; no tensor data has been read yet."""

    module: nn.Module
    infos: dict[str, TensorInfo]
    plan: LoadPlan
    expected: dict[str, Expected]


def check_rebuildable(module: nn.Module, spec: str) -> None:
    """Every part is built on the meta device and given only the checkpoint's tensors, so a non-persistent buffer
    (one no checkpoint holds) must be recomputed by its module's ``reset_buffers(device)`` (as
    components.rope.Rotary does). A module without one is a ComponentFailed naming it, before any tensor is read
    (it failed after both models were loaded, naming neither the part nor the way out)."""
    bad = [(name, made_by(m) or type(m).__name__, sorted(m._non_persistent_buffers_set))
           for name, m in module.named_modules()
           if m._non_persistent_buffers_set and not callable(getattr(m, "reset_buffers", None))]
    if bad:
        name, cls, buffers = bad[0]
        more = f" (and {len(bad) - 1} more module{'s' * (len(bad) > 2)} like it)" if len(bad) > 1 else ""
        raise ComponentFailed(
            f"{spec}: module {name or '<root>'} ({cls}) holds the non-persistent buffer(s) {short_list(buffers)}"
            f"{more}, which no checkpoint holds and nothing computes: parts are built on the meta device and get "
            "only the checkpoint's tensors; give the class a reset_buffers(device) method that makes them (as "
            "draftsmith.components.rope.Rotary does), or make them persistent and ship them in the checkpoint")


def optional_and_unused(module: nn.Module) -> tuple[set[str], set[str]]:
    """(the persistent buffers ``module`` computes itself where a checkpoint has none: models.DraftModel's t2d, the
    tensors a checkpoint may hold that it does not read: copies of the target's), by canonical name."""
    return tuple({f"{n}.{b}" if n else b for n, m in module.named_modules() for b in getattr(m, what, ())}
                 for what in ("derivable", "copies"))


def held_full(module: nn.Module, infos: dict[str, TensorInfo], rules: RuleSet) -> dict[str, tuple]:
    """The tensors a module may hold only empty (its ``empty_only``: canonical name -> the config key that left
    them out, e.g. an MoE's 0-wide shared MLP) that the checkpoint holds with elements: canonical name -> (checkpoint
    name, its info, that key). Such a tensor is no copy to pass over: the config drops what it computes."""
    empty = {f"{n}.{b}" if n else b: key for n, m in module.named_modules()
             for b, key in getattr(m, "empty_only", {}).items()}
    if not empty:
        return {}
    found = {}
    for name, info in infos.items():
        canon = rules.to_canonical(name)[0]
        if canon in empty and 0 not in info.shape:   # elements: no 0-wide tensor
            found[canon] = (name, info, empty[canon])
    return found


def plan_module(module: nn.Module, folder: str | Path, rules: RuleSet, *, spec: str,
                infos: dict[str, TensorInfo] | None = None) -> PlannedLoad:
    """List the checkpoint and check it against the module; CheckpointMismatch lists every misfit at once."""
    check_rebuildable(module, spec)
    infos = infos if infos is not None else list_tensors(folder)
    expected = expected_of(module)
    derivable, copies = optional_and_unused(module)
    full = held_full(module, infos, rules)
    try:
        plan = plan_load(infos, rules, expected, where=str(folder), spec=spec, optional=derivable,
                         unused=copies - set(full))
    except CheckpointMismatch as e:
        if full:
            name, info, key = next(iter(full.values()))
            e.add_note(f"note: the config's {key} is 0, so no shared MLP is built, but the checkpoint holds one: "
                       f"{name} is {list(info.shape)} ({len(full)} such tensor(s); only the empty ones of a 0-wide "
                       f"MLP, as transformers saves, may be there); set {key} in config.json to the count the "
                       "weights were saved with")
        if any(p.startswith("missing:") for p in e.problems) and (hidden := unlisted(infos)):
            files = short_list(sorted(set(hidden.values())), 3, quote=False)
            e.add_note(f"the shards hold {len(hidden)} tensor(s) the shard index does not list, which no reader "
                       f"sees: {short_list(sorted(hidden), 5)} (in {files}); a stale index? add them to its "
                       "weight_map, or re-save the checkpoint")
        raise
    return PlannedLoad(module, infos, plan, expected)


def fill(planned: PlannedLoad, *, dtype: torch.dtype, device: str) -> nn.Module:
    """Read the planned tensors and assign them (floats cast to ``dtype``; ints and bools keep their kind)."""
    raw = read_tensors(planned.infos, planned.plan.sources.values(), finite=True)  # NaN/inf: CheckpointError
    state = {}
    keep = stored_dtypes(planned.module)  # FP8 weights and their float32 scales are never cast to `dtype`
    keep = {**kept_dtypes(planned.module), **keep}   # nor what a module keeps in its own (an MoE router's float32)
    for canon in planned.plan.sources:
        want = planned.expected[canon].dtype
        t = planned.plan.tensor(canon, raw)   # a split rule's part: its rows of the fused tensor, sliced first
        state[canon] = t.to(device=device, dtype=keep.get(canon) or (dtype if want.is_floating_point else want))
    overflow(planned, raw, state)
    if faults := scale_faults(planned.module, state, dtype):   # FP8 scales that would read back as garbage
        file = planned.infos[planned.plan.sources[faults[0][0]]].file
        raise CheckpointError(file, "; ".join(f"{short(planned.plan.sources[n])}: {why}" for n, why in faults[:5])
                              + (f"; and {len(faults) - 5} more" if len(faults) > 5 else ""))
    planned.module.load_state_dict(state, strict=False, assign=True)
    set_compute_dtype(planned.module, dtype)  # FP8 linears dequantize into the model's dtype
    return planned.module


def overflow(planned: PlannedLoad, raw: dict[str, torch.Tensor], state: dict[str, torch.Tensor]) -> None:
    """A CheckpointError for finite stored values that the cast to a narrower float range made inf (1e5 in a
    float32 file, loaded as float16: the file's own check passed, and the model decoded garbage)."""
    narrowed = {canon: t for canon, t in state.items() if t.is_floating_point()
                and (src := raw[planned.plan.sources[canon]]).is_floating_point() and src.dtype != FLOAT4
                and torch.finfo(t.dtype).max < torch.finfo(src.dtype).max}
    if bad := nonfinite(narrowed):
        dtype = state[bad[0][0]].dtype   # the load dtype of the tensors named (FP8 ones keep their own)
        file = planned.infos[planned.plan.sources[bad[0][0]]].file
        raise CheckpointError(file, f"values past {str(dtype).removeprefix('torch.')}'s range (largest "
                                    f"{torch.finfo(dtype).max:g}) in " + ", ".join(
            f"{short(planned.plan.sources[n])} ({k} of {state[n].numel()})" for n, k in bad[:5])
            + (f" and {len(bad) - 5} more tensors" if len(bad) > 5 else "")
            + ": they would load as inf; load it in bfloat16 or float32")


def materialize(module: nn.Module, device: str) -> None:
    """Recompute non-persistent buffers and check nothing is left on the meta device."""
    for m in module.modules():
        if hasattr(m, "reset_buffers"):
            m.reset_buffers(device)
    left = [n for n, p in [*module.named_parameters(), *module.named_buffers()] if p.is_meta]
    if left:
        raise RuntimeError(f"parameters left uninitialised after loading: {left[:8]}")
