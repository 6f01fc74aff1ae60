"""``assemble``: spec + target folder + draft folder -> a SpeculativeModel, built on meta, checked, then loaded."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from draftsmith.assembler.build import (build_draft, build_target, held_d2t_rows, rule_set)
from draftsmith.assembler.checkpoint import list_tensors, read_tensors, regular_file
from draftsmith.assembler.explain import (checked_along, set_aside, DetectedNote, dropped_rules, explained,
                                          held_names, layers_note, pairing_note, quiet_notes, swapped_note,
                                          training_note, unchained_layers_note, unless, unread_sizes_note,
                                          vocab_mismatch, NOTE_KIND, UNFINISHED)
from draftsmith.assembler.field_notes import (fc_bias_note, fc_shape_note, flip_note, mla_note, mlp_size_note,
                                              qk_norm_note, qkv_bias_note, share_note)
from draftsmith.assembler.config import (draft_hf_config, flatten_draft_config, missing_target_keys,
                                         read_config_aside, stop_ids, target_hf_config)
from draftsmith.assembler.folders import checkpoint_dirs, spec_own
from draftsmith.assembler.load import PlannedLoad, fill, materialize, plan_module
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.assembler.remote_code import auto_tokenizer, remote_code_reason, unreadable_json
from draftsmith.assembler.vocab import check_draft_vocab, check_vocab_tensors, config_contradictions, held_shapes
from draftsmith.chat import PROCESSOR_TEMPLATE, processor_template
from draftsmith.hf_import import ready_transformers
from draftsmith.components import fused, gemv, packed, stacked
from draftsmith.components.split_rule import SplitRule
from draftsmith.components.targets import mtp_layer_patterns, undeclared_mtp_note
from draftsmith.components.weights import RegexRule, RuleSet
from draftsmith.decoding.graphs import graphs_enabled
from draftsmith.decoding.model import SpeculativeModel
from draftsmith.decoding.modes import RECURRENT, V2
from draftsmith.registry import Registry, UnknownComponent, default_registry
from draftsmith.errors import (CheckpointError, CheckpointNotFound, DraftsmithError, OptionError, Problem, SpecError,
                               short, short_text)
from draftsmith.specs.loader import checked_registry, load_spec
from draftsmith.specs.resolve import decoding_section_problems, unreached_steps
from draftsmith.specs.schema import COPIED, Spec

log = logging.getLogger("draftsmith")

TARGET_RULES = RuleSet([], ignore=[r"rotary_emb\.inv_freq$"])
TIED_HEAD = "lm_head.weight"   # a tied target's files may hold it too (ignored by plan_target's rules)


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    from draftsmith.options import parse_dtype as checked  # a float dtype, else OptionError (a ValueError)

    return checked(dtype)


def plan_target(folder: Path, registry: Registry, backend) -> tuple[PlannedLoad, Any]:
    """The target built on meta and its checked load plan (no tensor data read), and its transformers config.

    The model_type and the sizes are checked before transformers parses the config, so a missing one is named
    (transformers would take its Llama default) and an unsupported or misspelled type is refused, each with the
    list of registered targets; an unsupported type first, before its other keys (a gemma target was told to change
    its hidden_act, then that gemma is not supported)."""
    reading = read_config_aside(folder)
    if isinstance(kind := reading.config.get("model_type"), str):
        known_target(registry, kind)  # UnknownComponent: "unknown target 'x'. ... known: llama (builtin), ..."
    if reading.error is not None:
        raise reading.error
    raw = reading.config
    if (why := missing_target_keys(raw, [f"{n} ({p})" for n, p in registry.names("target")])) is not None:
        raise CheckpointError(raw.file, why)
    cfg = target_hf_config(folder, registry)
    arch = registry.build("target", cfg.model_type)   # once a load: its model, and its own module names renamed
    model = build_target(cfg, registry, backend, arch)
    made = arch.name_rules() if callable(getattr(arch, "name_rules", None)) else []
    renames = [SplitRule(**rule) if "into" in rule else RegexRule(**rule) for rule in made]   # fused tensors: split
    rules = RuleSet(renames, ignore=[*TARGET_RULES.ignore, *(tied_head_sources(arch) if model.tie else []),
                                *mtp_layer_patterns(raw),   # declared MTP layers are a draft's, not the target's
                                *(arch.ignored() if callable(getattr(arch, "ignored", None)) else [])])  # vision
    infos = list_tensors(folder)
    with explained(lambda: undeclared_mtp_note(raw, list(infos))):   # MTP layers held, undeclared: the key named
        return plan_module(model, folder, rules, spec=f"target ({cfg.model_type})", infos=infos), cfg


def known_target(registry: Registry, kind: str) -> None:
    """An UnknownComponent for a model_type no target is registered for. A type transformers itself names
    (ministral3 beside ministral, qwen2_moe beside qwen2) is another architecture, not a misspelling: it gets no
    did-you-mean, which would send its user to load it as a model it is not."""
    try:
        registry.get("target", kind)
    except UnknownComponent as e:
        from transformers import CONFIG_MAPPING

        if kind not in CONFIG_MAPPING:
            raise
        raise UnknownComponent("target", kind, e.known, registry.not_loaded_note(), hint=(
            f" {short(kind)} is a transformers model type of its own (no misspelling of a known one): draftsmith "
            "has no target of that type; a plugin can register one.")) from None


def tied_head_sources(arch: Any) -> list[str]:
    """Ignore patterns for the head a tied target's files may hold: lm_head.weight, and under each prefix the type
    renames to ``lm_head.`` (Kimi-K2.5's and Gemma-3's language_model.lm_head.weight)."""
    heads = ["", *(old for old, new in getattr(arch, "prefixes", ()) if new == "lm_head.")]
    return ["^" + re.escape(head or "lm_head.") + r"weight$" for head in heads]


def check_tied_head(planned: PlannedLoad) -> None:
    """A tied target (tie_word_embeddings) whose files also hold an lm_head.weight (dropped by the ignore rule) is
    refused when that head differs from the embedding: transformers 5 then keeps the head (it does not tie),
    transformers 4 ties it to the embedding, so no reading is the target's own. Equal tensors (a tied checkpoint
    that saved the head too) load as tied. Runs before the load (validate runs it too) and reads the two tensors
    only when the head is there; they are compared as stored (the head at the embedding's dtype)."""
    heads = [n for n in planned.plan.ignored if n.endswith(TIED_HEAD)]   # tied_head_sources' names
    if not getattr(planned.module, "tie", False) or not heads:
        return
    head_name = heads[0]
    embed_name = planned.plan.sources.get("model.embed_tokens.weight", "model.embed_tokens.weight")
    if embed_name not in planned.infos:
        return   # the plan reported it missing
    found = read_tensors(planned.infos, [head_name, embed_name])
    head, embed = found[head_name], found[embed_name]
    if head.shape == embed.shape and torch.equal(head.to(embed.dtype), embed):
        return
    shapes = "" if head.shape == embed.shape else f" (shapes {list(head.shape)} and {list(embed.shape)})"
    raise CheckpointError(planned.infos[head_name].file, (
        f"holds {head_name} and {embed_name} with different values{shapes}, but the target's config has "
        f"tie_word_embeddings true: transformers 5 keeps {head_name} as the output head (it does not tie them), "
        f"transformers 4 ties the head to {embed_name} and drops {head_name}. Choose one: set tie_word_embeddings "
        f"false in config.json to use {head_name}, or remove {head_name} from the file to use the embedding"))


def fill_target(planned: PlannedLoad, *, dtype: torch.dtype, device: str):
    model = fill(planned, dtype=dtype, device=device)
    model.tie_weights()  # assign=True replaced embed_tokens.weight; lm_head follows it again
    materialize(model, device)
    return model.eval()


def load_target(folder: Path, registry: Registry, backend, *, dtype: torch.dtype, device: str):
    planned, cfg = plan_target(Path(folder), registry, backend)
    check_tied_head(planned)
    return fill_target(planned, dtype=dtype, device=device), cfg


@dataclass(frozen=True)
class Assembly:
    """Both models built on the meta device with their checked load plans: what assemble() fills with tensors."""

    target_plan: PlannedLoad
    target_cfg: Any
    draft_model: Any
    draft_plan: PlannedLoad
    draft_dir: Path
    tokenizer: Any
    stops: frozenset
    target_dir: Path | None = None


def plan_assembly(spec: Spec | str | Path, target: str | Path | None = None, draft: str | Path | None = None,
                  registry: Registry | None = None, *, backend: Callable | None = None) -> Assembly:
    """Everything assemble() checks before it reads a tensor: the spec, both folders, their configs, tensor names,
    shapes and dtypes against the models built on meta, the tokenizer and the stop ids, and the few small tensors
    a check needs (the draft's d2t / t2d; a tied target's duplicate head, with its embedding, only when the file
    holds one). Raises every problem it finds; reads no other tensor data (``draftsmith validate`` runs it on a
    spec's checkpoint folders). ``backend``: the
    attention function the models hold (default: the spec's; validate passes one, so that a backend this machine
    lacks, such as flash-attn on a CPU, does not fail a check of the checkpoints)."""
    registry = registry or default_registry()
    spec = load_spec(spec, registry)
    target_dir, draft_dir = checkpoint_dirs(spec, target, draft)   # a folder without a config: named
    backend = backend or registry.build("attn_backend", spec.decoding.attention)
    target_error = None
    try:
        with explained(swapped_note(registry, target_dir, "target")):
            target_plan, target_cfg = plan_target(target_dir, registry, backend)
            check_tied_head(target_plan)
    except (CheckpointMismatch, CheckpointError, CheckpointNotFound) as e:
        # the target's tensors or weight files (cut short, a shard missing): its config stands, so the draft is
        # checked too, unless the folders look swapped (the note: then that is the news) or the config is the fault
        if getattr(e, "__notes__", None) or getattr(e, "path", Path()).name == "config.json":
            raise
        try:
            target_cfg = target_hf_config(target_dir, registry)
        except DraftsmithError:
            raise e from None
        target_error, target_plan = e, None
    if spec.decoding.mode == "v2" and target_plan is not None and target_plan.module.recurrent:
        raise spec.error([Problem(
            "decoding.mode", f"{V2} is unsupported with this target: {RECURRENT}", found="v2", allowed="auto, v1",
            hint="Use mode: auto to fall back to v1 with a logged reason.")])
    try:
        draft_raw, draft_model, draft_plan, shapes = plan_draft(spec, registry, draft, draft_dir, target_cfg, backend)
    except DraftsmithError as e:   # both folders' problems in one run
        if target_error is None:
            raise
        said = "\n".join([str(e), *getattr(e, "__notes__", ())])
        target_error.add_note(f"note: the draft was checked too: {said}")
        raise target_error from None
    if target_error is not None:
        target_error.add_note("note: the draft was checked too: it fits")
        raise target_error
    if (mismatch := vocab_mismatch(draft_raw, target_cfg)) is not None:   # loads, but is likely the wrong draft
        log.warning("draft %s: %s", short_text(draft_dir, 300), mismatch)
    if said := config_contradictions(draft_raw, shapes, target_cfg.vocab_size):   # as inspect says it
        log.warning("draft %s: %s", short_text(draft_dir, 300), "; ".join(said))
    if (unfinished := training_note(info.file for info in draft_plan.infos.values())) is not None:
        log.warning("draft %s: %s", short_text(draft_dir, 300), unfinished, extra={NOTE_KIND: UNFINISHED})
    return Assembly(target_plan, target_cfg, draft_model, draft_plan, draft_dir,
                    read_tokenizer(target_dir, remote_as_none=True),   # a remote-code tokenizer: token ids only
                    frozenset(stop_ids(target_dir, target_cfg)), target_dir)


def plan_draft(spec: Spec, registry: Registry, draft: str | Path | None, draft_dir: Path, target_cfg, backend
               ) -> tuple[Any, Any, PlannedLoad, dict[str, tuple[int, ...]]]:
    """(the draft's config as written, its model on meta, its checked load plan, the shape of each canonical name
    one tensor holds: vocab.held_shapes): plan_assembly's draft half."""
    reading = read_config_aside(draft_dir)   # a config problem no tensor depends on is reported with the tensors'
    draft_raw = reading.config
    with checked_along(reading):
        infos = list_tensors(draft_dir)
        rules = rule_set(spec, registry, flatten_draft_config(draft_raw))  # ${key} placeholders: the draft config
        canonical = held_names(rules, infos)
        built: dict[str, Any] = {}   # the draft model, once built: notes about its tensors compare with it
        d2t_rows = held_d2t_rows(rules, infos)
        shapes = held_shapes(rules.remap(infos), infos)

        def rebuild(other: Spec):   # the draft another reading of the spec builds, for flip_note; what no name
            with quiet_notes():      # depends on (a topk past the vocabulary) set aside
                return build_draft(other, registry, draft_raw=draft_raw, draft_cfg=draft_cfg, target_cfg=target_cfg,
                                   canonical_names=canonical, backend=backend, d2t_rows=d2t_rows, defer=True)
        # a draft made for another target is the likeliest cause of what the spec's checks find: said first
        # ... and one detected as another spec: advice on this spec's fields would send the user to the wrong one
        own = spec_own(spec, draft, draft_dir, "draft")
        detected = DetectedNote(registry, spec, draft_dir, list(infos), shipped=own)
        notes = (swapped_note(registry, draft_dir, "draft", list(infos)), pairing_note(draft_raw, target_cfg),
                 unread_sizes_note(draft_raw), mlp_size_note(draft_raw, infos),
                 contradictions_note(draft_raw, shapes),
                 unchained_layers_note(spec, rules, list(infos), canonical),
                 lambda: dropped_rules(spec, registry, list(infos)),
                 detected, *unless(detected.elsewhere, layers_note(spec, canonical, rules, list(infos)),
                                   qkv_bias_note(spec, registry, draft_raw, canonical, built),
                                   qk_norm_note(spec, registry, draft_raw, canonical, built),
                                   fc_bias_note(canonical, built), fc_shape_note(rules, infos, built),
                                   mla_note(spec, draft_raw, canonical, built),
                                   share_note(spec, rules, infos, canonical, built),
                                   flip_note(spec, registry, rebuild, canonical, built, shapes)))
        with explained(*notes):
            draft_cfg = draft_hf_config(draft_raw, draft_dir / "config.json")
            draft_model = built["draft"] = build_draft(spec, registry, draft_raw=draft_raw, draft_cfg=draft_cfg,
                                                       target_cfg=target_cfg, canonical_names=canonical,
                                                       backend=backend, source=(draft_dir, list(infos)),
                                                       defer=True, d2t_rows=d2t_rows)
            with set_aside(spec, draft_model.deferred_problems, draft_raw):
                try:
                    draft_plan = plan_module(draft_model, draft_dir, rules, spec=spec.name, infos=infos)
                except CheckpointMismatch as e:   # what the vocabulary checks find is said with the misfit
                    vocab_notes(e, spec, draft_model, rules, infos, draft_dir)
                    raise
                check_draft_vocab(spec, draft_plan, draft_dir)
    return draft_raw, draft_model, draft_plan, shapes


def contradictions_note(draft_raw, shapes: dict[str, tuple[int, ...]]) -> Callable[[], str | None]:
    """The note for a draft whose config states a vocabulary size its tensors contradict (as inspect says it)."""
    def note() -> str | None:
        said = config_contradictions(draft_raw, shapes)
        return "note: the draft's " + "; ".join(said).removeprefix("its ") if said else None
    return note


def vocab_notes(error: CheckpointMismatch, spec: Spec, draft_model, rules, infos, draft_dir: Path) -> None:
    """A draft misfit's note: its d2t / t2d map checked as a draft that fits is checked (it was said only once the
    misfit was fixed: a hunting and a dogfooding helper; the spec's topk against the vocabulary is a problem the
    build sets aside, said with the misfit too)."""
    sources = {parts[0]: name for name in infos if (parts := rules.to_parts(name)[0]) in (("d2t",), ("t2d",))}
    try:
        check_vocab_tensors(spec, draft_model, sources, infos, draft_dir)
    except DraftsmithError as e:
        error.add_note(f"note: also: {e}")


def assemble(spec: Spec | str | Path = "demo", target: str | Path | None = None, draft: str | Path | None = None, *,
             device: str = "cpu", dtype: str | torch.dtype = "float32",
             registry: Registry | None = None, warn_fallback: bool = True) -> SpeculativeModel:
    """A target and its draft, built from ``spec`` and loaded from their checkpoint folders, ready to decode.

    spec: a built-in or plugin spec name, a YAML file, or a :class:`Spec`; ``target`` / ``draft`` default to the
    spec's ``checkpoints`` (relative to its file; ``cache:NAME`` is fetched once). Both models are built on the meta
    device and every checkpoint problem (missing, unexpected or misshapen tensors, configs that contradict the
    spec) is raised at once, before any tensor is read. ``dtype``: the target's (and the draft's unless the
    spec's ``decoding.draft_dtype`` says otherwise); ``device``: "cpu" or "cuda[:N]". A spec whose ``mode: auto``
    falls back from the trees it asks for to a chain is said in a warning, unless ``warn_fallback`` is False (a
    caller that says the plan of each call itself, as ``draftsmith generate`` does, overrides included)."""
    registry = checked_registry(registry)
    if not isinstance(warn_fallback, bool):   # "no" would read as true
        raise OptionError(f"warn_fallback: True or False, got the {type(warn_fallback).__name__} "
                          f"{short_text(repr(warn_fallback), 100)}")
    spec = load_spec(spec, registry)
    if problems := decoding_section_problems(spec.decoding):   # a with_decoding() copy's values
        raise SpecError(f"{spec.source} {COPIED}", problems)
    dtype = parse_dtype(dtype)
    from draftsmith.options import check_device

    check_device(device)  # OptionError before anything is read: 'cuda' without CUDA, 'cuda:3' with one GPU
    if problems := machine_problems(spec, registry, device):   # and 'graphs: on' without CUDA, flash without it
        raise spec.error(problems, MachineSettings)
    # a folder missing, unnamed or without a config is said before transformers' import (~2 s); the target as found,
    # so that a cache:NAME is resolved once (each resolve checks the cached files' sha256: ~0.5 s for SmolLM2)
    target_dir, _ = checkpoint_dirs(spec, target, draft)
    ready_transformers()   # before two threads' first assemble() both import it (its lazy import is not thread-safe)
    p = plan_assembly(spec, target_dir, draft, registry)
    target_plan, draft_model, draft_plan = p.target_plan, p.draft_model, p.draft_plan
    tokenizer, stops = p.tokenizer, p.stops

    # Assign.
    target_model = fill_target(target_plan, dtype=dtype, device=device)
    draft_dtype = dtype if spec.decoding.draft_dtype == "same" else getattr(torch, spec.decoding.draft_dtype)
    fill(draft_plan, dtype=draft_dtype, device=device)
    if hasattr(draft_model, "d2t") and spec.draft.vocab.d2t == "absolute":
        # the checkpoint's d2t holds target ids; the model keeps offsets (before a missing t2d is derived from them)
        draft_model.d2t -= torch.arange(draft_model.d2t.shape[0], device=draft_model.d2t.device)
    materialize(draft_model, device)
    draft_model.compute_dtype = draft_dtype
    # the target runs frozen: its q | k | v and gate | up become one product each. The draft too where the fused
    # kernels run (CUDA: 0.83-0.94x the time, bench_gemm); on the CPU, where drafts train and export through their
    # own names, stacking it measured no gain, so it keeps them apart
    fast = fused.wanted(spec.decoding.graphs, device)
    stacks = [s.linear for m in (target_model, *[draft_model] * fast) for s in stacked.stack_model(m)]
    for module in (target_model, draft_model, *stacks):
        packed.pack_model(module, spec.decoding.linear, device)
        gemv.choose_products(module, spec.decoding.linear, fast)
        fused.fuse_model(module, fast)
    model = SpeculativeModel(
        target=target_model, draft=draft_model.eval(), spec=spec, tokenizer=tokenizer, stop_ids=stops,
        recurrent=target_model.recurrent, device=device, dtype=dtype, draft_dtype=draft_dtype,
        folders={"target": p.target_dir, "draft": p.draft_dir},
    )
    dec = spec.decoding
    if warn_fallback and dec.mode == "auto" and dec.topk > 1 and (plan := model.plan()).mode == "v1":   # at a load
        log.warning("draftsmith: spec %s asks for trees (topk %d), and %s", spec.name, dec.topk, plan.reason)
    if said := unreached_steps(dec.topk, dec.steps, dec.draft_tokens, dec.mode, dec.page_size):
        log.warning("draftsmith: spec %s: %s", spec.name, said)
    return model


class MachineSettings(OptionError, SpecError):
    """A spec's settings this machine or ``device`` cannot honour, at the spec's file and lines: a bad option's
    exit (2), as ``--device cpu`` against them is."""


def machine_problems(spec: Spec, registry: Registry, device: str) -> list[Problem]:
    """The spec's settings a load on ``device`` refuses, all at once (validate warns of them: a spec is portable):
    ``decoding.graphs: on`` / ``compile`` without CUDA, an attention backend this machine lacks (flash-attn)."""
    problems = []
    try:
        graphs_enabled(spec.decoding.graphs, device)
    except OptionError as e:
        problems.append(Problem("decoding.graphs", str(e).removeprefix("decoding.graphs: ")))
    try:
        registry.build("attn_backend", spec.decoding.attention)
    except OptionError as e:
        problems.append(Problem("decoding.attention", str(e)))
    return problems


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")  # any one: a tokenizer
_READ_BESIDE = ("merges.txt", "special_tokens_map.json", "added_tokens.json",   # also read by transformers, if there
                "chat_template.jinja")


def read_tokenizer(folder: Path, *, remote_as_none: bool = False):
    """The target's tokenizer, or None without its files; a file that is not a regular file inside the folder, or
    one transformers cannot read, is a CheckpointError (read before any tensor is); ``remote_as_none``: a tokenizer
    that is the checkpoint's own code (never run) is None, said in a warning (the target decodes token ids). A
    tokenizer without a chat template of its own gets the processor's, from chat_template.json
    (:func:`draftsmith.chat.processor_template`: AutoProcessor reads it, AutoTokenizer does not), which a malformed
    file is a CheckpointError naming."""
    def there(names):   # a link counts as there even when it points nowhere: regular_file says what it is
        return [folder / f for f in names if (folder / f).exists() or (folder / f).is_symlink()]

    present = there(TOKENIZER_FILES)
    if not present:
        return None
    for path in present + there(_READ_BESIDE):
        regular_file(path, folder)
    try:
        tokenizer = auto_tokenizer(folder)
    except Exception as exc:  # noqa: BLE001 (tokenizers and transformers raise many kinds on a broken file)
        remote = remote_code_reason(folder, exc)   # Kimi's tokenization_kimi.py: draftsmith never runs it
        if remote is not None and remote_as_none:
            log.warning("target %s: %s", short_text(folder, 300), remote)
            return None
        why = remote or (f"it lacks the key {exc}" if isinstance(exc, KeyError) else short_text(exc, 300))   # 'key'
        raise CheckpointError(unreadable_json(present + there(_READ_BESIDE)) or present[0],
                              f"transformers cannot read the tokenizer: {why}") from None
    if not getattr(tokenizer, "chat_template", None) and there([PROCESSOR_TEMPLATE]):
        regular_file(folder / PROCESSOR_TEMPLATE, folder)   # read only where the tokenizer has no template
        if (template := processor_template(folder)) is not None:
            tokenizer.chat_template = template
    return tokenizer
