"""Plain records that hooks return. They hold names and factories; nothing is built when they are made."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict

BUILTIN = "builtin"   # the plugin name draftsmith's own hooks register under


class ConfigFirst:
    """Metadata of a params field that a spec may leave out to read the checkpoint config's key instead, the
    field's default applying only where the config has none (``Annotated[bool | None, ConfigFirst()]``).
    ``draftsmith list --params`` shows such a default as "draft config, else False"; the component's resolver
    (which sees ``model_fields_set``) does the reading."""

    def __repr__(self) -> str:
        return "ConfigFirst()"


class NoParams(BaseModel):
    """Params model of a component that takes none: any key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Component:
    """One buildable part, named ``(kind, name)``; its factory builds it, called as its kind says
    (:data:`draftsmith.hooks.kinds.KINDS`: ``factory(params, **context)``, or ``factory()`` for a backend or target).

    ``params`` is a pydantic model (``extra="forbid"``) that checks the part's keys in a spec.

    ``holds(params)``, where given, answers without building anything: regexes of the canonical draft tensor names
    (see FORMATS.md; ``fc.weight``, ``layers.0.self_attn.q_proj.weight``) that the part, given these spec params
    as a dict ("auto" and absent keys included: answer for every reading they allow), may hold. ``inspect`` and
    the closest-family scores use it to tell which checkpoint names a spec's draft can place. Without it a fusion
    may hold any ``fc.*`` name and the first layer's ``hidden_norm``, and an attention any ``self_attn.*`` name.

    ``reads(params, draft_config)``, where given, answers without building anything too: the values the params a
    spec may leave to the checkpoint (``auto``, :class:`ConfigFirst`) take for this draft config (the raw
    config.json as a dict), as the factory builds them, by field name (``{"fc_norm": False, ...}``). ``doctor`` uses
    it to skip the reading in use when it tries the others (each a whole load); without it every reading is tried.
    """

    kind: str
    name: str
    factory: Callable[..., Any]
    params: type[BaseModel] = NoParams
    doc: str = ""
    holds: Callable[[dict[str, Any]], tuple[str, ...]] | None = None
    reads: Callable[[BaseModel, dict[str, Any]], dict[str, Any]] | None = None


SPEC_NAME = r"^[a-z0-9][a-z0-9._-]*$"   # what a spec's name may be: its file's name: too (specs.schema)
# The canonical name of the first layer's filled hidden_norm slot (a fusion's ``holds`` lists it; components.layers)
HIDDEN_NORM = r"^layers\.0\.hidden_norm\.weight$"


@dataclass(frozen=True)
class SpecSource:
    """A named YAML spec a plugin ships (``name`` must equal the file's ``name:``, and match :data:`SPEC_NAME`)."""

    name: str
    path: Path


@dataclass(frozen=True)
class LayoutMatch:
    """A detector's answer: the registered spec (by name) that loads a checkpoint, and what it had to assume."""

    spec: str
    reason: str
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    plugin: str = ""     # the plugin whose detector answered; set by the registry (a detector leaves it empty)

    @property
    def by_plugin(self) -> str:
        """The plugin whose detector answered, as messages name it; "" for draftsmith's own detection."""
        return "" if self.plugin in ("", BUILTIN) else self.plugin
