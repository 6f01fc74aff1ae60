"""Meta, plan, check, assign: load a checkpoint folder into a module built on the meta device."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from draftsmith.assembler.checkpoint import TensorInfo, list_tensors, read_tensors
from draftsmith.assembler.plan import Expected, plan_load
from draftsmith.components.weights import RuleSet


def expected_of(module: nn.Module) -> dict[str, Expected]:
    """Canonical names the module wants: its state_dict, each tied tensor once (first name wins)."""
    seen, out = set(), {}
    for name, t in module.state_dict(keep_vars=True).items():
        if id(t) not in seen:
            seen.add(id(t))
            out[name] = Expected(tuple(t.shape), t.dtype)
    return out


def load_module(module: nn.Module, folder: str | Path, rules: RuleSet, *, dtype: torch.dtype, device: str,
                spec: str, infos: dict[str, TensorInfo] | None = None) -> nn.Module:
    infos = infos if infos is not None else list_tensors(folder)
    expected = expected_of(module)
    plan = plan_load(infos, rules, expected, where=str(folder), spec=spec)  # raises before any data is read
    raw = read_tensors(infos, plan.sources.values())
    state = {}
    for canon, src in plan.sources.items():
        t = raw[src]
        want = expected[canon].dtype
        state[canon] = t.to(device=device, dtype=dtype if want.is_floating_point else want)
    module.load_state_dict(state, strict=False, assign=True)
    return module


def materialize(module: nn.Module, device: str) -> None:
    """Recompute non-persistent buffers and check nothing is left on the meta device."""
    for m in module.modules():
        if hasattr(m, "reset_buffers"):
            m.reset_buffers(device)
    left = [n for n, p in [*module.named_parameters(), *module.named_buffers()] if p.is_meta]
    if left:
        raise RuntimeError(f"parameters left uninitialised after loading: {left[:8]}")
