"""The kinds of component the assembler asks for: how it calls each kind's factory and what it needs back.

A :class:`~draftsmith.hooks.Component` of a kind not listed here is refused when its plugin registers (nothing
would ever build it), and so is one whose name a spec keeps for a choice of its own (``reserved``) or whose params
model has a field named as the spec key that names the component (``key``). ``params`` is the component's
validated ``Params`` model; every other argument is a keyword. The registry calls the factory
(``Registry.build``): an exception it raises, or a result of the wrong sort (:meth:`Kind.problem`), becomes a
:class:`~draftsmith.registry.ComponentFailed` naming the component, its plugin and this call; so does an
exception from one of the result's ``methods`` when the assembler calls it later (a plugin rule's ``apply``), and
an answer of another type than ``methods`` lists for it; ``optional`` methods (a split rule's ``parts`` and
``produces``; a target's ``moe_layers``, ``moe_recipe``, ``moe_keys`` and ``name_rules``) the result may lack, and
where it has one, it must be callable and is guarded alike.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reserved:
    """A name a spec keeps for a choice of its own among registered components."""
    meaning: str                 # how the choice is made (shown in listings and messages)
    choices: tuple[str, ...]     # the components it may choose; the first is the reading without a checkpoint


@dataclass(frozen=True)
class Kind:
    call: str            # the factory's call, as the assembler makes it
    returns: str         # what it must return
    module: bool = True       # the result must be a torch.nn.Module (checked)
    none_ok: bool = False     # None is a valid result (a factory that works in place)
    called: bool = False      # the result is itself called (an attention function)
    methods: Mapping[str, tuple[type, ...]] = field(default_factory=dict)   # called later -> types it returns
    optional: Mapping[str, tuple[type, ...]] = field(default_factory=dict)  # as methods, where the result has them
    fields: tuple[str, ...] = ()    # the result's attributes the assembler reads
    key: str | None = "kind"        # the spec key that names the component (None: a spec never gives params)
    reserved: Mapping[str, Reserved] = field(default_factory=dict)   # names a spec keeps for a choice of its own
    # a plugin's result tried on what the factory was given (its keywords), before anything else uses it: why it
    # cannot serve, or None (a norm's weight [dim], a block that keeps its input's shape)
    probe: Callable[[Any, Mapping[str, Any]], str | None] | None = None
    # a plugin's module result is watched at every forward: its output must be [..., width] over its input's
    # leading dims and in its input's dtype, width being this of the factory's keywords (None: the input's own);
    # a norm computing in float32 that never casts back would otherwise fail later in draftsmith's code (a bug's
    # "internal error") or not at all. None: not watched.
    output: Callable[[Mapping[str, Any]], int | None] | None = None

    def problem(self, made: object) -> str | None:
        """Why a factory's result is not of the sort this kind needs ('' for None), or None when it is."""
        if made is None:
            return None if self.none_ok else ""
        if self.module:
            from torch import nn

            if not isinstance(made, nn.Module):
                return "not a torch.nn.Module"
        elif self.called and not callable(made):
            return "not callable"
        lacks = [m for m in self.methods if not callable(getattr(made, m, None))]
        lacks += [f for f in self.fields if not hasattr(made, f)]
        if lacks:
            return f"it has no {', '.join(lacks)}"
        uncallable = [m for m in self.optional if hasattr(made, m) and not callable(getattr(made, m))]
        return f"its {', '.join(uncallable)} {'is' if len(uncallable) == 1 else 'are'} not callable" if uncallable \
            else None

    @property
    def guarded(self) -> dict[str, tuple[type, ...]]:
        """The result's methods the assembler calls later, with the types each returns: ``methods`` and those of
        ``optional`` (a result that lacks one is never asked for it)."""
        return {**self.methods, **self.optional}


class _Sort(type):
    """A class ``isinstance`` answers by its ``holds``: an answer's sort beyond its type (see :class:`Names`)."""

    def __instancecheck__(cls, answer: object) -> bool:
        return cls.holds(answer)


class Names(metaclass=_Sort):
    """isinstance(x, Names): a non-empty tuple or list of strings, as a split rule's ``parts`` answers."""

    @staticmethod
    def holds(answer: object) -> bool:
        return isinstance(answer, (tuple, list)) and bool(answer) and all(isinstance(x, str) for x in answer)


Names.__name__ = "a non-empty tuple or list of str"   # as a guarded call's message names the sort


def keeps_width(made: Any, width: int, sort: str) -> str | None:
    """Why ``made`` (a module) does not map a [1, 2, width] input (what the draft passes: [B, T, width]) to an output
    of that shape and dtype, or None. Run where its parameters are (the meta device while the assembler builds: no
    data, no time), in their dtype and, on meta, also with them in bfloat16 (a module that computes in float32 and does
    not cast back passes every float32 run, and the same spec runs in bfloat16 by one option: refused whatever this
    run's dtype, as the contract says); a forward that cannot run on that input is not judged here
    (data-dependent code on meta): what it raises at run time is."""
    import torch

    device = next((p.device for p in made.parameters()), torch.device("meta"))
    dtype = next((p.dtype for p in made.parameters() if p.is_floating_point()), torch.float32)
    tries = [dtype] + [torch.bfloat16] * (device.type == "meta" and dtype != torch.bfloat16)
    for dt in tries:
        try:
            with _held_as(made, dt):
                out = made(torch.zeros(1, 2, width, device=device, dtype=dt))
        except Exception:   # noqa: BLE001
            return None
        said = f"a [1, 2, {width}] {str(dt).removeprefix('torch.')} input"
        if not isinstance(out, torch.Tensor) or list(out.shape) != [1, 2, width]:
            shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            return f"its forward maps {said} to {shape}; {sort} keeps its input's shape"
        if out.dtype != dt:
            return (f"its forward maps {said} to {str(out.dtype).removeprefix('torch.')}; {sort} returns its "
                    "input's dtype (cast the result back)")
    return None


@contextlib.contextmanager
def _held_as(module: Any, dtype: Any):
    """``module`` with its floating parameters and buffers in ``dtype`` meanwhile (on the meta device: no data is
    copied), put back after."""
    from torch import nn

    saved = []
    for sub in module.modules():
        for store in (sub._parameters, sub._buffers):
            for name, t in list(store.items()):
                if t is not None and t.is_floating_point() and t.dtype != dtype:
                    saved.append((store, name, t))
                    store[name] = nn.Parameter(t.to(dtype), t.requires_grad) if isinstance(t, nn.Parameter) else \
                        t.to(dtype)
    try:
        yield module
    finally:
        for store, name, t in saved:
            store[name] = t


def norm_problem(made: Any, dim: int) -> str | None:
    """Why a norm module cannot take a checkpoint's norm tensor (``weight`` [dim]) or keep its input's shape."""
    from torch import nn

    weight = getattr(made, "weight", None)
    if not isinstance(weight, nn.Parameter) or list(weight.shape) != [dim]:
        held = f"[{', '.join(map(str, weight.shape))}]" if isinstance(weight, nn.Parameter) else "none"
        return (f"its weight parameter is {held}; a norm holds `weight` [{dim}], where the checkpoint's norm tensor "
                "loads")
    return keeps_width(made, dim, "a norm")


ANY: tuple[type, ...] = ()            # a method whose answer is not used
STR_OR_NONE = (str, type(None))
# a target's moe_layers: any collection of layer indices (the assembler only iterates it: build_target's set(),
# parts.continued_moe's comprehension), a range (the layers from first_k on) or a set as well as a list
LAYER_INDICES = (list, tuple, range, set, frozenset)

KINDS: dict[str, Kind] = {
    "layer": Kind("factory(params, *, attn, mlp, norm, dims, input_norm, hidden_norm, mix, norm_before_residual)",
                  "a decoder layer (torch.nn.Module; see components.layers.DecoderLayer)"),
    "attention": Kind("factory(params, *, dims, layer_idx, in_width, backend, norm)",
                      "an attention module over the paged KV pool, forward(x, pos, kv) -> [B, T, dims.hidden], with "
                      "cache_layout() naming the per-token shapes it stores (see components.attention.GQAttention)",
                      fields=("cache_layout",), output=lambda context: context["dims"].hidden,
                      reserved={"auto": Reserved("mla when the draft config has MLA fields, else gqa",
                                                ("gqa", "mla"))}),
    "mlp": Kind("factory(params, *, dims)", "the feed-forward module (see components.mlp.SwiGLU)",
                probe=lambda made, context: keeps_width(made, context["dims"].hidden, "an mlp"),
                output=lambda context: None),
    "moe": Kind("factory(params, *, dims)", "a target's mixture-of-experts feed-forward module, built for the layers "
                "its TargetArch.moe_layers names, and a draft's with draft.moe: as_target (components.moe.SparseMoE)",
                probe=lambda made, context: keeps_width(made, context["dims"].hidden, "an mlp"),
                output=lambda context: None),
    "norm": Kind("factory(params, *, dim, eps)", "a norm module whose parameter is `weight` of shape [dim]",
                 probe=lambda made, context: norm_problem(made, context["dim"]), output=lambda context: None),
    "fusion": Kind("factory(params, *, hidden, target_width, draft_config, target_layers, norm)",
                   "the draft's input fusion, a module with fuse(emb, hidden, from_target), taps, first_mix, "
                   "first_in_factor, norm_before_residual and norm_output (see components.fusion)",
                   fields=("fuse", "taps", "first_mix", "first_in_factor", "norm_before_residual", "norm_output")),
    "weight_rule": Kind("factory(params)", "a rule with apply, invert, describe and inverse "
                        "(see components.weights.RegexRule; a split rule also has parts and produces, see "
                        "components.split_rule.SplitRule)", module=False,
                        methods={"apply": STR_OR_NONE, "invert": STR_OR_NONE, "describe": (str,)},
                        optional={"parts": (Names, type(None)), "produces": (bool,)}, fields=("inverse",)),
    "quant": Kind("factory(params, *, module)", "anything; it quantizes `module` in place", module=False,
                  none_ok=True, key="method"),
    "attn_backend": Kind("factory()", "an attention function fn(q, k, v, mask, scale) (see components.backends)",
                         module=False, called=True, key=None),
    "target": Kind("factory()", "a target architecture with check, attention_recipe, window and recurrent, and where "
                   "it has them moe_layers, moe_recipe, moe_keys and name_rules (see components.targets.TargetArch)",
                   module=False, methods={"check": ANY, "attention_recipe": (tuple,), "window": (int, type(None))},
                   optional={"moe_layers": LAYER_INDICES, "moe_recipe": (tuple,), "moe_keys": (set, frozenset),
                             "name_rules": (list, tuple)},
                   fields=("recurrent",), key=None),
}
