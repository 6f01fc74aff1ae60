"""Whether two specs build the same draft apart from the tensor names they read: what convert's last line asks of
the spec detection proposes for a written draft against the spec its source was read with (a plugin family's draft
read as a built-in family's would silently lose the plugin's norm or MLP), and what it proposes instead."""
from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from draftsmith.components.eagle3_config import as_inputs, drafted_norm_output
from draftsmith.convert.fits import fit
from draftsmith.convert.inspect import Inspection
from draftsmith.errors import short, short_text
from draftsmith.specs.resolve import dig

# The parts of a spec that say what draft it builds, apart from the tensor names it reads (its weights section) and
# the layer count (read from those names): what the spec a source was read with and the one detection proposes for
# the result must agree on. The rope pair order and the d2t convention are not compared: convert moves the q/k rows
# into the layout's order and writes d2t as offsets (the published convention), and each folder's spec says what it
# stores.
BUILDS = (*(f"draft.{k}" for k in ("layer", "attention", "mlp", "norm", "fusion", "norms", "feed_back", "vocab",
                                   "share")), "quant")
MOVED = ("draft.attention.rope", "draft.vocab.d2t")


def spec_differences(proposed: Any, family: Any, path: str = "") -> list[tuple[str, Any]]:
    """(dotted path, proposed value) where the proposed spec says what the family spec does not; the name and the
    checkpoint folder are not differences, nor the description (inspect's names what it read from the folder), nor
    a family value of auto (read from the same config), nor an aux ids list the family leaves to the config (inspect
    read it there)."""
    if path in ("name", "description", "checkpoints") or family == "auto":
        return []
    if path == "draft.fusion.aux_layers.ids" and family is None:
        return []
    if isinstance(proposed, Mapping) and isinstance(family, Mapping):
        return [d for k in (*proposed, *(k for k in family if k not in proposed))
                for d in spec_differences(proposed.get(k), family.get(k), f"{path}.{k}" if path else k)]
    return [] if proposed == family else [(path, proposed)]


def build_differences(source: Mapping[str, Any], proposed: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted path, the source spec's value, the proposed spec's) wherever two specs (plain data, as inspect
    proposes them) build different drafts: their :data:`BUILDS` sections, the rope order aside; a proposed value of
    auto is read from the written config, which states the source's facts."""
    full = completed(source), completed(proposed)
    return [d for section in BUILDS for d in _section_differences(
        *(dig(spec, section) for spec in full), section, said=(dig(source, section), dig(proposed, section)))]


def _section_differences(ours: Any, theirs: Any, section: str,
                         said: tuple[Any, Any] = (None, None)) -> list[tuple[str, Any, Any]]:
    """:func:`build_differences` of one section: a component reference naming another component is one difference
    (its params are that component's own: each said as its spec writes it, ``said``, its params' defaults not
    added), else each value that differs, the rope order aside."""
    from draftsmith.specs.resolve import SECTIONS

    key = next((s.key for s in SECTIONS if s.path == section), None)
    if key and isinstance(ours, Mapping) and isinstance(theirs, Mapping) and ours.get(key) != theirs.get(key):
        return [(section, *(w if w is not None else full for w, full in zip(said, (ours, theirs))))]
    return [(path, value, dig(theirs, path.removeprefix(section).lstrip(".")))
            for path, value in spec_differences(ours, theirs, section) if path not in MOVED]


def completed(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a spec as plain data) with each component reference's params completed by its params model's
    defaults, so that a param one spec states at its default and another leaves out are the same (EAGLE-1's
    ``embed_norm: false``); a param a spec may leave out to read the draft config (ConfigFirst) stays as stated,
    and a name the registry does not hold (attention's ``auto``) as it is; aux ids read as layer outputs are said
    as the layer inputs they tap (the same taps, as convert writes them), and post-norm feedback spelled
    ``draft.feed_back: post_norm`` beside a head norm, or beside ``norm_output: feed_back`` (which implies it), as
    the fusion's ``norm_output: feed_back`` alone."""
    from draftsmith.hooks.records import ConfigFirst
    from draftsmith.registry import default_registry
    from draftsmith.specs.resolve import SECTIONS, known, put, resolve

    registry, out = default_registry(), copy.deepcopy(dict(data))
    for where in SECTIONS:
        ref = dig(out, where.path)
        name = ref.get(where.key) if isinstance(ref, Mapping) else None
        if not known(registry, where.kind, name):
            continue
        params = resolve(registry, where.kind, name, {k: v for k, v in ref.items() if k != where.key})[1]
        said = {k: v for k, v in params.model_dump(mode="json").items() if k in params.model_fields_set or not any(
            isinstance(m, ConfigFirst) for m in type(params).model_fields[k].metadata)}
        put(out, where.path, {where.key: name, **said})
    aux = dig(out, "draft.fusion.aux_layers")   # taps as layer inputs: ids [1, 3] at outputs are [2, 4] at inputs
    if isinstance(aux, Mapping) and aux.get("at") == "output" and isinstance(aux.get("ids"), list) and all(
            type(i) is int for i in aux["ids"]):
        put(out, "draft.fusion.aux_layers", {**aux, "ids": as_inputs(aux["ids"], aux["at"]), "at": "input"})
    fusion = dig(out, "draft.fusion")   # post-norm feedback said one way: the fusion's norm_output feed_back
    if isinstance(fusion, Mapping) and isinstance(out.get("draft"), Mapping) and "norm_output" in fusion and \
            drafted_norm_output(fusion["norm_output"], out["draft"].get("feed_back")) == "feed_back":
        put(out, "draft.fusion", {**fusion, "norm_output": "feed_back"})
        put(out, "draft.feed_back", "pre_norm")   # feed_back implies it: post_norm beside it says it twice
    return out


def other_draft_line(found: Inspection, source: Inspection, differ: list[tuple[str, Any, Any]]) -> str:
    """The last line where the spec detection proposes for the written draft (``found``) builds another draft than
    the spec the source was read with (``differ``: :func:`build_differences`): the spec that builds the source's
    draft from the written names (:func:`source_reading`), then the proposed spec and what it builds otherwise."""
    shown = "; ".join(f"{path}: {_said(theirs)}, not {_said(ours)}" for path, ours, theirs in differ[:4]) + (
        "; ..." if len(differ) > 4 else "")
    return (f"{source_reading(found, source)}; detection proposes spec {found.match.spec} for it (generate --draft "
            f"takes it without --spec), which builds another draft ({shown})")


def source_reading(found: Inspection, source: Inspection) -> str:
    """What loads the written draft (``found``) as the draft its source was read as: the source's family spec where
    it alone reads the written names, else the source's spec as ``draftsmith inspect SRC`` prints it, else that spec
    with its weights section replaced by the one the written folder's inspection proposes (rules for the new
    layout's names); where none of them reads them all, where to start."""
    from draftsmith.specs.loader import load_spec

    src, out, family = short_text(source.folder, 300), short_text(found.folder, 300), source.match.spec
    mine = {**source.spec, "checkpoints": {**source.spec["checkpoints"], "draft": str(found.folder.resolve())}}
    if _reads(found.folder, mine):
        if not spec_differences(source.spec, load_spec(family).model_dump(mode="json")):
            return f"load it with spec {family}, the spec its source was read with"
        return f"load it with the spec `draftsmith inspect {src}` prints ({family}'s, as its source was read)"
    if _reads(found.folder, {**mine, "weights": found.spec["weights"]}):
        return (f"load it with the spec `draftsmith inspect {src}` prints ({family}'s, as its source was read), its "
                f"weights section replaced by the one `draftsmith inspect {out}` prints")
    return (f"no spec inspect proposes builds its source's draft from these names: start from the {family} spec "
            f"`draftsmith inspect {src}` prints")


def _said(value: Any) -> str:
    """A spec value as a difference line says it: unstated where a spec leaves it out, a component reference as its
    name and params (``scalenorm (scale: 2.0)``), anything else cut short."""
    if isinstance(value, Mapping) and isinstance(name := value.get("kind", value.get("method")), str):
        params = ", ".join(f"{k}: {short(v, 30)}" for k, v in value.items() if k not in ("kind", "method"))
        return f"{short(name, 40)}{f' ({params})' if params else ''}"
    return "unstated" if value is None else short(value, 60)


def _reads(folder: Path, spec_data: Mapping[str, Any]) -> bool:
    """Whether ``spec_data`` loads ``folder``'s tensors by name as they are (nothing missing, unexpected or
    colliding); False where that cannot be judged."""
    judged = fit(folder, spec_data)
    return judged is not None and not judged.misfits
