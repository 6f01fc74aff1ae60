"""The fresh drafts train can make, as data: one :class:`Maker` row per layout (``draft_io.MAKERS``, keyed by
fusion kind) carrying its writer and the spec values it needs (:class:`Need`), so that a new layout is a new row;
:func:`refusals` phrases, for any table, what a spec asks for that its row cannot make."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import reduce


def value_at(spec, path: str):
    """The spec's value at a dotted path: 'draft.attention.kind' -> spec.draft.attention.kind; None where a
    component's params leave the key out ('draft.fusion.embed_norm' of a spec that does not state it)."""
    return reduce(lambda obj, part: getattr(obj, part, None), path.split("."), spec)


def as_yaml(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Need:
    """Spec values a fresh draft needs: ``allowed`` maps each dotted spec path to the values it may hold. A spec
    holding another is said as ``said`` and the value found ("attention kind 'mla'"), or, for several paths, as
    ``said`` and all of their values in YAML ("norms {input: none, final: true}")."""
    said: str
    allowed: Mapping[str, tuple] = field(hash=False)

    def refusal(self, spec) -> str | None:
        found = {path: value_at(spec, path) for path in self.allowed}
        if all(found[path] in ok for path, ok in self.allowed.items()):
            return None
        if len(found) == 1:
            return f"{self.said} {next(iter(found.values()))!r}"
        values = ", ".join(f"{path.rpartition('.')[2]}: {as_yaml(v)}" for path, v in found.items())
        return f"{self.said} {{{values}}}"


@dataclass(frozen=True)
class Maker:
    """One layout train writes a fresh draft in. ``write(spec, target_dir, folder, kept, target_config, seed)``
    writes its starting folder (which the spec then loads); ``needs``: what it needs beyond the table's common
    needs, each refusal said "... with {name}"; ``reduced_vocab``: whether it writes the d2t / t2d of a reduced
    vocabulary (``kept``), else the target's full one; ``makes``: what it writes, as preflight names it."""
    name: str
    makes: str
    write: Callable[..., None]
    needs: tuple[Need, ...] = ()
    reduced_vocab: bool = False

    @property
    def said(self) -> str:
        return f"{self.name} ({self.makes})"


def refusals(spec, makers: Mapping[str, Maker], common: tuple[Need, ...]) -> list[str]:
    """What of ``spec`` no row of ``makers`` can make, one phrase each: its fusion kind when no row has it, else
    the ``common`` needs it misses, then its row's own; [] when it can be made."""
    kind = spec.draft.fusion.kind
    if (maker := makers.get(kind)) is None:
        return [f"fusion kind {kind!r}"]
    return ([said for need in common if (said := need.refusal(spec))]
            + [f"{said} with {maker.name}" for need in maker.needs if (said := need.refusal(spec))])
