"""The layouts ``convert`` writes and train's export uses: the table in ``layouts.yaml`` (each a config style, a
safetensors naming, a rotary order and the weight rules that write it), the layout a spec's own rules are written
in, and the config facts and config each layout writes for a draft."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from draftsmith.assembler.styles import STYLES, ConfigStyle, from_facts, to_facts
from draftsmith.components.weights import RegexRule, RuleSet

LAYOUTS_FILE = Path(__file__).parent / "layouts.yaml"

@dataclass(frozen=True)
class Layout:
    name: str
    description: str
    config: str
    weights: str
    rope: str
    rules: RuleSet
    spec: str
    holds: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    max_layers: int | None = None
    together: tuple[tuple[str, ...], ...] = ()
    facts: Mapping[str, str] = field(default_factory=dict)
    drops: tuple[str, ...] = ()
    refuses: Mapping[str, str] = field(default_factory=dict)


def layouts() -> dict[str, Layout]:
    from draftsmith.assembler.build import rule_set
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec

    out = {}
    for name, row in yaml.safe_load(LAYOUTS_FILE.read_text()).items():
        rules = list(rule_set(load_spec(row["rules_from"]), default_registry()).rules) if "rules_from" in row else []
        rules += [RegexRule.model_validate(r) for r in row.get("rules", [])]
        out[name] = Layout(name, row["description"], row["config"], row["weights"], row["rope"], RuleSet(rules),
                           row["spec"], tuple(row.get("holds", ())), tuple(row.get("requires", ())),
                           row.get("max_layers"), tuple(map(tuple, row.get("together", ()))),
                           dict(row.get("facts", {})), tuple(row.get("drops", ())), dict(row.get("refuses", {})))
    return out


def own_layout(rules: RuleSet, table: Mapping[str, Layout] | None = None) -> Layout | None:
    """The layout a draft named by ``rules`` (a spec's weight rules) is exported in (train): one whose own spec reads
    through these very rules (so the trained spec loads the export) and whose rules are among them, in their order
    (it writes names only as the spec itself names them; the spec's other rules are aliases it also reads). For
    eagle1-speculators (or a copy) its layout; for eagle3-speculators the speculators layout, which writes
    ``layers.N.*`` where the spec's ``midlayer.`` rule also reads speculators' older names (the midlayer layout, which
    borrows those rules, is eagle3-llama's to load). None where no layout is so written: eagle3-llama (the midlayer
    and layers layouts name speculators' fusion norms, which its rules do not read) keeps its flat config."""
    from draftsmith.assembler.build import rule_set
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec

    def among(mine: tuple, theirs: tuple) -> bool:   # each of mine in theirs, in theirs' order
        rest = iter(theirs)
        return all(r in rest for r in mine)

    return next((t for t in (table or layouts()).values()
                 if among(t.rules.rules, rules.rules)
                 and list(rule_set(load_spec(t.spec), default_registry()).rules) == list(rules.rules)), None)


def layer_count(names: Iterable[str]) -> int:
    """The decoder layers canonical tensor names hold (``layers.N.``)."""
    return len({m.group(1) for n in names if (m := re.match(r"^layers\.(\d+)\.", n))})


def layout_facts(layout: Layout, facts: Mapping[str, Any], names: Iterable[str],
                 d2t_rows: int | None = None) -> dict[str, Any]:
    """The config facts ``layout`` writes for a draft of ``facts`` and these canonical tensor names: its ``drops``
    left out, its ``facts`` read from the names, the layer count the names hold (a midlayer config's
    num_hidden_layers may say 40; speculators and vLLM build the layers it says), and ``d2t_rows``, the length of
    the d2t written, as draft_vocab_size where the facts state none (draftsmith's loads read it from the d2t; vLLM
    and SGLang would build the target's vocabulary). :func:`layout_config` then writes them; convert and train's
    export both do."""
    names = list(names)
    out = {k: v for k, v in facts.items() if k not in layout.drops}
    if layers := layer_count(names):
        out["num_hidden_layers"] = layers
    if d2t_rows and not out.get("draft_vocab_size") and "draft_vocab_size" not in layout.drops:
        out["draft_vocab_size"] = d2t_rows
    return out | {key: any(re.search(p, n) for n in names) for key, p in layout.facts.items()}


def layout_config(layout: Layout, facts: Mapping[str, Any], source: Mapping[str, Any],
                  source_style: ConfigStyle, names: Iterable[str] = ()) -> dict[str, Any]:
    """The config ``layout`` writes for these facts (:func:`layout_facts`), given the ``source`` config (read in
    ``source_style``) they came from: in the layout's style, and where the source is in that style too, what it
    says of itself (a speculators config's ``speculators_config``: its verifier) is the source's, not the style's
    template (a null verifier). ``names``: the tensor names written beside it, which decide the family that reads
    it back. Convert and train's export both write this."""
    style = STYLES[layout.config]
    config = from_facts(facts, style)
    # hf norm_output=true is SpecForge's "head", but vLLM / TensorRT-LLM read it as EAGLE 3.1's fed-back norm; an
    # absent key is "head" to them: left out unless the source config itself said it in this style, or the family
    # that reads the result back takes an absent key otherwise (EAGLE 3.1's per-aux norms: feed_back)
    if style.unsaid is not None and facts.get("norm_output") == style.unsaid and not (
            source_style is style and to_facts(source, source_style).get("norm_output") == style.unsaid):
        unsaid = {k: v for k, v in config.items() if k != "norm_output"}
        if absent_reads(unsaid, list(names)) in (None, style.unsaid):
            config = unsaid
    return config | ({k: source[k] for k in style.own if k in source} if source_style is style else {})


def absent_reads(config: Mapping[str, Any], names: list[str]) -> str | None:
    """The norm_output the built-in family detected for this config (no norm_output key) and these tensor names
    resolves; None where no family, or one without an EAGLE-3 fusion, takes them."""
    from draftsmith.assembler.detect import detect_builtin_layout, eagle3_values
    from draftsmith.specs.loader import load_spec

    match = detect_builtin_layout(config, names) if names else None
    if match is None or load_spec(match.spec).draft.fusion.kind != "eagle3":
        return None
    return eagle3_values(match.spec, config, names)[0]["norm_output"]


def writable_kinds(table: Mapping[str, Layout]) -> set[str]:
    """The fusion kinds the layouts' own specs hold (EAGLE-1 and EAGLE-3): what convert can write."""
    return {fusion_kind(layout) for layout in table.values()}


def fusion_kind(layout: Layout) -> str:
    """The fusion kind of the drafts ``layout`` holds (its own spec's)."""
    from draftsmith.specs.loader import load_spec

    return load_spec(layout.spec).draft.fusion.kind
