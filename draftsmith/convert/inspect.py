"""``inspect``: which family a checkpoint is, a spec that loads it with every value it had to assume stated, and
what did not fit. Used by ``draftsmith inspect``, ``generate --draft`` without ``--spec`` and ``draftsmith convert``
(which reads a checkpoint through the spec detected here). What the family spec alone would not load is read into
the proposal: split rules for fused qkv_proj / gate_up_proj, FP8 scales, the rope order, q/k norms, an own
embedding, the d2t convention."""
from __future__ import annotations

import dataclasses
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from draftsmith.assembler.checkpoint import TensorInfo, list_tensors
from draftsmith.assembler.config import (DRAFT_CONFIG, known_keys, draft_hf_config, flatten_draft_config, read_config,
                                        read_raw_config)
from draftsmith.assembler.config_values import fusion_value_problems
from draftsmith.assembler.detect import (FAMILIES, eagle3_values, final_norm_reading, full_model, missing_keys,
                                        missing_required, row_settings, ruled_out)
from draftsmith.assembler.fit import STACKED, closest_families, holder, split_parts, unfit_names
from draftsmith.assembler.styles import IDS, style_of
from draftsmith.components.eagle3_keys import MODELOPT_KEYS
from draftsmith.components.params import gqa_keys
from draftsmith.components.targets import target_record
from draftsmith.convert.fp8 import fp8_reading
from draftsmith.errors import CheckpointError, SpecError, short_text
from draftsmith.hooks import LayoutMatch
from draftsmith.paths import config_file
from draftsmith.registry import Registry, default_registry
from draftsmith.specs.resolve import put
from draftsmith.specs.schema import Rule

# The keys read inside eagle_config (components.eagle3_config.config_value / config_ids: a nested key wins over the
# top-level one); any other (NVIDIA Model-Optimizer's next_layer_regular, ...) is unread. Model-Optimizer's flags
# are read: honoured (use_last_layernorm: norm_output) or refused where the fusion does not compute them
# (eagle3_keys.unbuilt_problems)
EAGLE_CONFIG_READ = {IDS, "num_aux_hidden_states", "fc_norm", "norm_before_fc", "norm_before_residual", "norm_output",
                     *MODELOPT_KEYS}


@dataclass(frozen=True)
class Inspection:
    folder: Path
    config: dict[str, Any]                   # the config file as written
    infos: dict[str, TensorInfo]
    match: LayoutMatch | None
    spec: dict[str, Any] | None              # a spec (plain data) that loads it, every assumed value stated
    unread: tuple[str, ...]                  # config keys draftsmith does not read
    given: Any = None                        # the Spec the folder was read with instead of detection (convert --spec)


def inspect_checkpoint(folder: str | Path, registry: Registry | None = None, spec: Any = None) -> Inspection:
    """The folder's layout and the spec that loads it, every value the checkpoint decides stated: detected, or
    read with ``spec`` (a name, a YAML path or a Spec: a family no detector knows, ``convert --spec``), whose values
    the checkpoint decides (``auto``, the flags its config states, the rope order, d2t's convention) are read as for
    a detected one. The match then names the spec as given (a path stays a path, which loads it again; a Spec is
    named by its name)."""
    from draftsmith.assembler.build import attention_name
    from draftsmith.specs.loader import load_spec

    registry = registry or default_registry()
    folder = Path(folder)   # read_raw_config refuses what is not a readable folder
    config, infos = read_raw_config(folder), list_tensors(folder)
    if faults := fusion_value_problems(config):   # the detectors read them: said naming the file, as a load says
        raise CheckpointError(config_file(folder), "; ".join(faults))
    names = list(infos)
    kind = config.get("model_type")   # a whole model's folder (an MTP draft): its type's mixture-of-experts keys
    arch = target_record(registry, kind)
    moe = arch.moe_keys() if callable(getattr(arch, "moe_keys", None)) else set()
    unread = unread_keys(flatten_draft_config(config), known_keys(style_of(folder, config)) | moe)
    given = None if spec is None else load_spec(spec, registry)
    ref = None if given is None else given.name if spec is given else str(spec) if str(spec) in registry.specs \
        else str(Path(spec).resolve())   # a file: the proposal's extends names it from anywhere it is saved
    with config_named(folder):   # a detector's refusal of the config's fusion flags names the file
        match = registry.detect_layout(config, names) if given is None else \
            LayoutMatch(ref, f"read with the spec given, {ref!r}")
    if match is None:
        return Inspection(folder, config, infos, None, None, unread)
    draft_hf_config(read_config(folder))   # the sizes a spec needs are stated (no spec is proposed otherwise)
    spec = load_spec(match.spec, registry) if given is None else given
    data, family = spec.model_dump(mode="json"), spec.model_dump(mode="json")   # the proposal, the family's
    from draftsmith import hub
    from draftsmith.assembler.folders import checkpoint_ref
    from draftsmith.specs.loader import spec_name_for

    data["name"] = spec_name_for(f"{spec.name}-{folder.name}")  # valid for any folder name (spaces, accents)
    data["checkpoints"]["draft"] = str(folder.resolve())
    if (target := checkpoint_ref(spec, "target")) is not None and hub.cache_name(target) is None:
        data["checkpoints"]["target"] = str(Path(target).resolve())   # was relative to the family's own file
    fusion = data["draft"]["fusion"]
    params = registry.get("fusion", fusion["kind"]).params.model_fields
    if "norm_output" in params and "aux_layers" in params:  # an EAGLE-3 fusion: state every flag it resolved
        stated = None if given is None else given.draft.fusion.params.get("norm_output", "auto")   # as a load reads
        with config_named(folder):
            values, _ = eagle3_values(spec, config, names, registry)   # a plugin's spec: only its registry has it
            aux = values.pop("aux_layers")
            fusion |= values | {"aux_layers": aux if aux["ids"] else {"at": aux["at"]}}
            final = final_norm_reading(spec, registry, config, names, data["draft"],
                                       None if stated == "auto" else stated)
        if final is not None:
            match = noted(match, final)   # none read from the config (use_last_layernorm false), no norm.weight
    for path, value in row_settings(match, config, names):
        put(data, path, value)   # what the detected row holds that its family spec does not say (noted there)
    attention = data["draft"]["attention"]
    if attention_name(spec, config) == "gqa":   # what the proposal's attention reads (use_qk_norm: qk_norm config)
        unread = tuple(k for k in unread if k not in gqa_keys(attention))
    if "rope" in attention and isinstance(config.get("rope_interleave"), bool):  # the stored pair order, if said
        attention["rope"] = "interleaved" if config["rope_interleave"] else "neox"
        match = noted(match, f"attention.rope: {attention['rope']} (the config's rope_interleave)")
    if (qk := qk_norm_reading(spec, registry, config, names, attention)) is not None:
        match = noted(match, qk)
    if (own := own_embedding(data, flatten_draft_config(config), infos)) is not None:
        match = noted(match, own)
    if (split := split_reading(spec, registry, config, names)) is not None:
        rules, note = split   # before the family's renames: rules do not chain, each matches the checkpoint's name
        weights = data.setdefault("weights", {})
        weights["rules"] = rules + list(weights.get("rules") or [])
        spec = spec.model_copy(update={"weights": spec.weights.model_copy(update={
            "rules": (*map(Rule.model_validate, rules), *spec.weights.rules)})})   # what fp8_reading reads by
        match = noted(match, note)
    if (fp8 := fp8_reading(spec, registry, config, infos, data.get("quant") or {})) is not None:
        weights = data.setdefault("weights", {})
        weights["rules"] = [{"kind": "regex", **rule} for rule in fp8.rules] + list(weights.get("rules") or [])
        weights["ignore"] = list(weights.get("ignore") or []) + fp8.ignore
        if fp8.quant is not None:
            data["quant"] = fp8.quant
        for note in fp8.notes:
            match = noted(match, note)
    vocab = flatten_draft_config(config).get("vocab_size")
    if "d2t" in infos and "vocab" in data["draft"] and (read := d2t_convention(infos, vocab)) is not None:
        data["draft"]["vocab"]["d2t"], note = read
        match = noted(match, note)
    elif "d2t" in infos and "vocab" in data["draft"]:   # the convention cannot be read without t2d: said
        match = noted(match, f"vocab.d2t: {data['draft']['vocab'].get('d2t', 'offset')} (assumed: the checkpoint "
                             "holds no t2d to confirm whether d2t holds offsets or target ids; t2d is derived from d2t "
                             "read so)")
    for note in few_tokens(spec, registry, config, infos, data["decoding"]):
        match = noted(match, note)
    if changed := changed_paths(family, data, skip={"name", "description", "checkpoints"}):
        # the family's description may state what the folder overrides ("128x128 block scales" of a channel one)
        shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
        data["description"] = (f"{family['description'] or match.spec} (proposed by draftsmith inspect for "
                               f"{short_text(folder.name, 100)}: {shown} as the folder states)").lstrip()
    return Inspection(folder, config, infos, match, data, unread, given)


def changed_paths(before: Any, after: Any, path: str = "", skip: frozenset | set = frozenset()) -> list[str]:
    """The dotted paths where ``after`` states another value than ``before`` does (a list compared whole), outside
    ``skip``; a value ``before`` leaves to the checkpoint (auto, null) is read there, not changed."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [p for key in dict.fromkeys([*before, *after]) if key not in skip
                for p in changed_paths(before.get(key), after.get(key), f"{path}{key}.")]
    return [] if before == after or before in ("auto", None) else [path.rstrip(".")]


def split_reading(spec, registry: Registry, config: Mapping[str, Any],
                  names: list[str]) -> tuple[list[dict[str, Any]], str] | None:
    """Split rules for the fused modules (:data:`~draftsmith.assembler.fit.STACKED`: qkv_proj, gate_up_proj)
    that the family's rules leave fused where its draft holds every part, each matching the checkpoint's own names
    (a rule per module, every layer's alike where the layer numbers carry over), with the note to print; None when
    there is none. A part another tensor already lands on gets no rule (the load names the collision)."""
    from draftsmith.assembler.build import rule_set
    from draftsmith.components.split_rule import SplitRule

    rules, holds = rule_set(spec, registry, flatten_draft_config(config)), holder(spec, registry)
    canonical = {n: c for n in names if (c := rules.to_canonical(n)[0]) is not None}
    fused = {n: parts for n, c in canonical.items() if (parts := split_parts(c, holds)) is not None
             and not set(parts) & set(canonical.values())}
    def reads(rule: dict[str, Any]) -> SplitRule:
        return SplitRule(match=rule["match"], into=rule["into"])

    out: list[dict[str, Any]] = []
    for name, parts in fused.items():
        if any(reads(r).parts(name) == parts for r in out):
            continue
        rule = split_rule(name, canonical[name], parts)
        if any(reads(rule).parts(n) not in (None, fused.get(n)) for n in names):   # a layer whose names differ
            rule = split_rule(name, canonical[name], parts, alone=True)
        out.append(rule)
    if not out:
        return None
    modules = sorted({canonical[n].rpartition(".")[0].rpartition(".")[2] for n in fused})
    shown = " and ".join(f"{m} ({' | '.join(p.removesuffix('_proj') for p in STACKED[m])})" for m in modules)
    return out, (f"weights.rules: {len(out)} split rule(s) read the fused {shown} as their parts stacked by rows, "
                 "each part's rows the config's (a fused tensor that does not hold their sum is refused before "
                 "loading)")


def split_rule(name: str, canonical: str, parts: tuple[str, ...], alone: bool = False) -> dict[str, Any]:
    """A split rule reading checkpoint ``name`` (the family's rules make it ``canonical``) as ``parts``: every tensor
    of its module (weight, bias, FP8 scales), of every layer when its layer numbers carry over to the canonical name
    (as groups, like fp8.scale_rule's), else of this module (``alone``: always), else this name alone."""
    module, _, leaf = name.rpartition(".")
    target, _, canonical_leaf = canonical.rpartition(".")
    if not module or leaf != canonical_leaf:   # the family renames the last part too: this name alone
        return {"kind": "split", "match": f"^{re.escape(name)}$", "into": [_literal(p) for p in parts]}
    targets = [p.rpartition(".")[0] for p in parts]
    numbers = [x for x in module.split(".") if x.isdigit()]
    kept = [x for x in target.split(".") if x.isdigit() and x in numbers]
    if alone or len(set(numbers)) != len(numbers) or sorted(kept) != sorted(numbers):
        return {"kind": "split", "match": f"^{re.escape(module)}\\.", "into": [_literal(t) + "." for t in targets]}
    pattern = r"\.".join(r"(\d+)" if x in numbers else re.escape(x) for x in module.split("."))
    into = [".".join(f"\\{numbers.index(x) + 1}" if x in numbers else _literal(x) for x in t.split(".")) + "."
            for t in targets]
    return {"kind": "split", "match": f"^{pattern}\\.", "into": into}


def _literal(text: str) -> str:
    """``text`` as a replacement template that writes it as it is."""
    return text.replace("\\", "\\\\")


QK_NORM = re.compile(r"(^|\.)(q_norm|k_norm)\.weight$")


def qk_norm_reading(spec, registry: Registry, config: Mapping[str, Any], names: list[str],
                    attention: dict[str, Any]) -> str | None:
    """Per-head q / k norms (``self_attn.q_norm.weight``, Qwen3 style) in the checkpoint: ``qk_norm: true`` set on
    an attention whose params have it (the kind ``auto`` resolves to for this config), with a note; the spec the
    family names would refuse them as unexpected tensors otherwise."""
    from draftsmith.assembler.build import attention_name

    if attention.get("qk_norm") or not any(QK_NORM.search(n) for n in names):
        return None
    kind = attention_name(spec, config)
    if "qk_norm" not in registry.get("attention", kind).params.model_fields:
        return None
    attention["qk_norm"] = True
    return "attention.qk_norm: true (the checkpoint holds per-head q_norm / k_norm weights)"


def unread_keys(flat: Mapping[str, Any], known: set[str]) -> tuple[str, ...]:
    """The config keys draftsmith does not read, sorted: top-level ones, and those inside eagle_config as
    ``eagle_config.KEY`` (read_raw_config refuses an eagle_config that is no object)."""
    out = [k for k in flat if k not in known]
    inner = flat.get("eagle_config")
    out += [f"eagle_config.{k}" for k in inner if k not in EAGLE_CONFIG_READ] if isinstance(inner, Mapping) else []
    return tuple(sorted(out))


@contextmanager
def config_named(folder: Path) -> Iterator[None]:
    """A fusion's refusal of what the draft's config states (SpecError 'draft fusion' whose every problem is a
    'draft config KEY' one: use_last_layernorm beside norm_output, or beside a held norm.weight) said as a problem of
    the folder's config file, as the refusals of its other values name it ('draft fusion has 1 problem' named none)."""
    try:
        yield
    except SpecError as e:
        if e.source != "draft fusion" or not all(p.path.startswith(DRAFT_CONFIG) for p in e.problems):
            raise
        raise SpecError(str(config_file(folder) or folder / "config.json"), e.problems) from None


def noted(match: LayoutMatch, note: str) -> LayoutMatch:
    return dataclasses.replace(match, assumptions=(*match.assumptions, note))


def own_embedding(data: dict[str, Any], config: Mapping[str, Any], infos: dict[str, TensorInfo]) -> str | None:
    """A draft narrower than its target (``target_hidden_size`` != ``hidden_size``) that ships an embedding of its
    own width embeds with it: ``share.embed: own_if_different`` in ``data``, and the spec's ignore rules that would
    drop that tensor removed. Returns the note to print, or None when nothing changed."""
    import re

    hidden, target = config.get("hidden_size"), config.get("target_hidden_size")
    names = [n for n, i in infos.items() if n.endswith("embed_tokens.weight") and len(i.shape) == 2
             and i.shape[1] == hidden]
    share = data["draft"].get("share")
    if not (isinstance(target, int) and target != hidden and names and share and share.get("embed") == "target"):
        return None
    share["embed"] = "own_if_different"
    weights = data.get("weights") or {}
    weights["ignore"] = [p for p in weights.get("ignore", []) if not any(re.search(p, n) for n in names)]
    return (f"share.embed: own_if_different (the draft is {hidden} wide, its target {target} "
            f"(target_hidden_size); it ships {names[0]} of its own width)")


def few_tokens(spec, registry: Registry, config: Mapping[str, Any], infos: dict[str, TensorInfo],
               decoding: dict[str, Any]) -> list[str]:
    """A draft vocabulary smaller than the family's ``decoding.topk`` (its config's draft_vocab_size, else its d2t's
    length, else its vocab_size: what the assembler bounds topk by) gets a topk of that size in ``decoding``, and
    the draft_tokens and mode that topk allows (the proposal would otherwise refuse its own folder); the notes to
    print, none where the family's topk fits."""
    from draftsmith.assembler.build import held_d2t_rows, rule_set
    from draftsmith.specs.resolve import is_chain, most_draft_tokens, tree_blockers

    flat = flatten_draft_config(config)
    vocab = flat.get("draft_vocab_size") or held_d2t_rows(rule_set(spec, registry, flat), infos) or \
        flat.get("vocab_size")
    if type(vocab) is not int or not 1 <= vocab < decoding["topk"]:
        return []
    decoding["topk"] = vocab
    notes = [f"decoding.topk: {vocab} (the draft's vocabulary has {vocab} token{'s' * (vocab != 1)}; the family's "
             "topk is more)"]
    most = most_draft_tokens(vocab, decoding["steps"])
    if decoding["draft_tokens"] > most and not is_chain(vocab, decoding["mode"], decoding["page_size"]):
        decoding["draft_tokens"] = most
        notes.append(f"decoding.draft_tokens: {most} (the most a tree of topk {vocab} drafts in {decoding['steps']} "
                     "steps)")
    if decoding["mode"] == "v2" and (blockers := tree_blockers(vocab, decoding["page_size"])):
        decoding["mode"] = "auto"
        notes.append("decoding.mode: auto (v2, tree drafting with compaction, is unsupported here: "
                     f"{'; '.join(blockers)})")
    return notes


NO_MAP = "vocab.d2t: d2t / t2d form no valid map as offsets or as target ids; loading will refuse it"


def d2t_convention(infos: dict[str, TensorInfo], vocab: Any = None) -> tuple[str, str] | None:
    """offset or absolute, read from the (small) d2t / t2d tensors themselves: the one place inspect reads data.
    Without t2d, the one reading whose target ids stay inside the config's ``vocab`` (the target's) and increase
    (an absolute d2t read as offsets leaves it); None where t2d is absent and that does not decide."""
    import torch

    from draftsmith.assembler.checkpoint import read_tensors
    from draftsmith.assembler.vocab import VocabMapError, check_vocab_map

    has_t2d = "t2d" in infos
    if not has_t2d and not (isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 0):
        return None
    t = read_tensors(infos, ["d2t", "t2d"] if has_t2d else ["d2t"])
    d2t, t2d = t["d2t"].long(), t["t2d"].bool() if has_t2d else None
    if d2t.dim() != 1 or (has_t2d and t2d.dim() != 1):   # misshapen: no map (the load plan says what is wrong)
        return ("offset", NO_MAP) if has_t2d else None
    sound = []
    for convention, offsets in (("offset", d2t), ("absolute", d2t - torch.arange(d2t.shape[0]))):
        try:
            check_vocab_map(offsets, t2d, vocab=vocab)
        except VocabMapError:
            continue
        sound.append(convention)
    how = {"offset": "target = draft + d2t[draft]", "absolute": "d2t holds target ids"}
    if has_t2d and sound:
        return sound[0], f"vocab.d2t: {sound[0]} ({how[sound[0]]}; checked against t2d)"
    if has_t2d:
        return "offset", NO_MAP
    if len(sound) != 1:
        return None
    return sound[0], (f"vocab.d2t: {sound[0]} ({how[sound[0]]}: the one reading that maps into the config's "
                      f"{vocab} target tokens; the checkpoint holds no t2d to check it against)")


def render_unknown(found: Inspection, whole_model: bool = True) -> str:
    """Why no family fits: the closest ones, the names each could not place (and those its rules would drop), what
    it needs that is missing and what it rules out that is there; with ``whole_model``, a last line when the
    folder holds a whole causal LM (a target), which no draft family describes (generate and doctor say it in
    their own words, as a swapped pair of folders)."""
    from draftsmith.assembler.names import group_names, quote

    where = short_text(found.folder, 300)
    n = len(found.infos)
    lines = [f"{where}: no registered detector recognises this layout ({n} tensor{'' if n == 1 else 's'})"]
    names = list(found.infos)

    def shown(group: list[str]) -> str:
        return ", ".join(quote(p) for p, _ in group_names(group)[:6]) or "none"

    rows = {f.spec for f in FAMILIES}
    closest = closest_families(found.config, names)
    # a spec is found by name (--spec); a layout is recognised only by a plugin's hook: both ways out are said
    detect = ("; to have it recognised without --spec (inspect, generate --draft), a plugin's draftsmith_detect_layout "
              "hook says which spec loads it (README, \"Adding components from a package\")")
    own = ("write a spec whose weights.rules rename them (README, \"Writing a spec\") and pass it with --spec, or "
           f"put it in a DRAFTSMITH_SPEC_PATH folder{detect}")
    if not closest:
        lines.append(f"  no registered family places any of these names: {own}")
    for spec, score, bad in closest:
        unfit = set(unfit_names(spec, found.config, names))
        dropped = [x for x in bad if x not in unfit]
        line = f"  closest: {spec} ({score:.0%} fit"
        line += "" if spec in rows else f", by its rules alone: a spec of {default_registry().spec_provider(spec)}"
        line += f"); names that did not fit: {shown([x for x in bad if x in unfit])}"
        line += f"; names its rules ignore: {shown(dropped)}" if dropped else ""
        if spec not in rows:   # no detection row says what it needs: try it with --spec
            lines.append(f"{line}; try --spec {spec}{detect}")
            continue
        missing = ", ".join(missing_required(spec, names, found.config)) or "none"
        there = ruled_out(spec, names, found.config)
        line += f"; there but ruled out: {', '.join(there)}" if there else ""
        keys = missing_keys(spec, names, found.config)
        line += f"; config keys it needs (one of): {', '.join(keys)}" if keys else ""
        lines.append(f"{line}; tensors it needs that are missing: {missing}")
    if closest and max(score for _, score, _ in closest) < 0.5:   # a layout of its own, more likely than a family's
        lines.append(f"  no registered family places half of these names: if the draft is a layout of its own, {own}")
    if whole_model and full_model(names):
        lines.append(f"note: {where} looks like a whole model (model.embed_tokens, model.layers.*), not a draft: is "
                     "it the target? `draftsmith inspect` reads a draft checkpoint")
    if (found.folder / "config.json").exists() and (found.folder / "params.json").exists():
        lines.append(f"note: {where} holds both config.json and Mistral's params.json; the config read is "
                     "config.json's (params.json is read only where there is no config.json): remove the one that "
                     "does not describe these weights")
    return "\n".join(lines)
