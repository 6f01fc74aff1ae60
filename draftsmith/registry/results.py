"""What a factory returns, checked against its kind (:data:`draftsmith.hooks.kinds.KINDS`) and, where the assembler
calls the result's methods later (a weight rule's ``apply`` while it maps tensor names, a target's ``check``),
guarded: an exception from a plugin's method is named with its component and plugin, never an internal error."""
from __future__ import annotations

import contextlib

import functools
from collections.abc import Mapping
from typing import Any

from draftsmith.errors import DraftsmithError, short
from draftsmith.hooks.kinds import Kind
from draftsmith.registry.checks import PLUGIN_FAULTS, raised


class ComponentFailed(DraftsmithError, RuntimeError):
    """A component's factory raised, or returned what its kind cannot use (:data:`draftsmith.hooks.kinds.KINDS`),
    or a method of what a plugin's factory returned raised when the assembler called it."""


WHO = "_draftsmith_who"   # on a plugin's result: the component that made it, "norm 'x' (plugin 'p')"


def made_by(obj: Any) -> str | None:
    """The plugin component that made ``obj`` (a module a plugin's factory returned), as messages name it, else
    None (draftsmith's own parts, and what could not be tagged)."""
    who = getattr(obj, WHO, None)
    return who if isinstance(who, str) else None


def checked(made: Any, contract: Kind, who: str, call: str, *, guard: bool,
            context: Mapping[str, Any] | None = None) -> Any:
    """``made`` if its kind can use it (wrapped in a :class:`Guarded` when ``guard`` and the kind has methods the
    assembler calls later), else a ComponentFailed saying what is missing. A guarded (plugin's) result is also
    tried as its kind's ``probe`` says, on the factory's keywords ``context``."""
    why = contract.problem(made)
    if why is None and guard and contract.probe is not None and context is not None:
        why = contract.probe(made, context)
    if why is not None:
        shown = short(made) if "\n" not in repr(made) else f"a {type(made).__name__}"   # a module's tree: its class
        raise ComponentFailed(f"{who}: its factory returned {shown}{f' ({why})' if why else ''}{call}")
    # an object of draftsmith's own classes (a plugin's RegexRule, TargetArch) runs draftsmith's code: not guarded
    ours = type(made).__module__.partition(".")[0] == "draftsmith"
    if guard and not ours:
        with contextlib.suppress(Exception):   # slots, a frozen object: its messages name its class instead
            setattr(made, WHO, who)
    if guard and not ours and contract.output is not None and context is not None:
        watch_output(made, who, contract.output(context))
    return Guarded(made, who, contract.guarded) if guard and contract.guarded and not ours else made


def watch_output(module: Any, who: str, width: int | None) -> None:
    """A forward hook on a plugin's ``module``: an output that is not one tensor of its input's leading dims,
    ``width`` wide (None: the input's width) and of its input's dtype is a :class:`ComponentFailed` naming the
    component, said where it happens (else the next module of draftsmith's fails on it, read as draftsmith's bug)."""
    import torch

    def hook(_module, args, kwargs, out):
        x = args[0] if args else next(iter(kwargs.values()), None)
        if not isinstance(x, torch.Tensor):
            return None
        want = [*x.shape[:-1], x.shape[-1] if width is None else width]
        if isinstance(out, torch.Tensor) and list(out.shape) == want and (
                out.dtype == x.dtype or torch.is_autocast_enabled(x.device.type)):   # autocast picks products' dtype
            return None
        got = (f"[{', '.join(map(str, out.shape))}] {str(out.dtype).removeprefix('torch.')}"
               if isinstance(out, torch.Tensor) else type(out).__name__)
        raise ComponentFailed(f"{who}: its forward mapped an input of [{', '.join(map(str, x.shape))}] "
                              f"{str(x.dtype).removeprefix('torch.')} to {got}; it must return "
                              f"[{', '.join(map(str, want))}] in its input's dtype")

    module.register_forward_hook(hook, with_kwargs=True)


class Guarded:
    """Stands for a plugin's result (every attribute is the result's own); a call of one of ``methods`` that raises
    anything but a draftsmith error, or answers other than the types listed for it, is a :class:`ComponentFailed`
    naming the component, its plugin and the call."""

    __slots__ = ("_made", "_who", "_methods")

    def __init__(self, made: Any, who: str, methods: Mapping[str, tuple[type, ...]]):
        self._made, self._who, self._methods = made, who, methods

    def __getattr__(self, name: str) -> Any:
        if name in Guarded.__slots__:   # not set yet (a copy being made): never look it up on the result
            raise AttributeError(name)
        value = getattr(self._made, name)
        return functools.partial(self._call, name, value) if name in self._methods else value

    def _call(self, name: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            answer = method(*args, **kwargs)
        except DraftsmithError:
            raise
        except PLUGIN_FAULTS as e:
            raise ComponentFailed(f"{self._called(name, args, kwargs)} raised {raised(e, method)}") from e
        if (types := self._methods[name]) and not isinstance(answer, types):
            sorts = " or ".join("None" if t is type(None) else t.__name__ for t in types)
            raise ComponentFailed(f"{self._called(name, args, kwargs)} returned {short(answer)}; {name} must "
                                  f"return {sorts}")
        return answer

    def _called(self, name: str, args: tuple, kwargs: dict) -> str:
        """"weight_rule 'x' (plugin 'p'): its apply('fc.weight')": quoted only on failure (apply runs per name)."""
        shown = [*map(short, args), *(f"{k}={short(v)}" for k, v in kwargs.items())]
        return f"{self._who}: its {name}({', '.join(shown)})"

    def __repr__(self) -> str:
        return repr(self._made)
