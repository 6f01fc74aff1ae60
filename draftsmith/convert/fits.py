"""The last check of a conversion: the written draft against the model the spec `inspect` proposes for it.

`verify` (draftsmith.convert.verify) compares what a folder reads back as through the rules; this asks the model
itself, as `assemble()` would, which tensors it misses or does not expect (a tensor carried under a name the target
layout's spec refuses was once written and only found at load time). There is no target at conversion time, so a
stand-in implied by the draft's own config takes its place: its sizes are guesses, so names are judged (missing,
unexpected, colliding; a derivable t2d may be left out), and each dimension of a shape only where stand-ins that
guess otherwise build it alike (another head count, MLP and depth; another vocabulary; another width), so that the
draft's config alone decides it (a draft's lm_head rows are its draft_vocab_size; its t2d is the target's vocabulary,
a guess). A draft no stand-in builds is refused with the first one's reason (its own config's). A stand-in that guesses
otherwise and does not build says the guess is no guess: every target the draft loads with agrees with it (a draft
sharing the target's embedding is the target's width). The reduced-vocabulary map (d2t / t2d, a few KB) is read
and checked as assemble() checks it. Dtypes, which are the checkpoint's own, are judged on the source before anything
is written (`Fit.refused`: convert copies them as they are). And only what the conversion introduced is judged by
name: a source that loads only with settings its family spec does not state (an FP8 `eagle_linear` needs a spec
with `quant: fp8`) misfits the proposed spec the same way before and after, which is no reason to refuse.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping


from draftsmith.errors import DraftsmithError, SpecError

if TYPE_CHECKING:
    from transformers import LlamaConfig

STAND_IN_LAYERS = 64   # enough layers for the usual taps; a draft tapping deeper gets as many as it taps


GUESSES = ("other", "vocab", "width")   # what a second, third and fourth stand-in guess otherwise


def stand_in_target(raw: Mapping[str, Any], draft_cfg, guess: str = "") -> LlamaConfig:
    """A target config the draft's config implies: its vocabulary, the width it reads and layers for its taps.
    ``guess`` (one of GUESSES): another guess at what the draft's config does not say: ``other`` head counts, MLP
    width and depth (the same width and vocabulary, which a shared embedding or head must match), another
    ``vocab``ulary or another ``width``: a shape every stand-in builds alike is the draft config's, not a guess."""
    from transformers import LlamaConfig

    from draftsmith.components.eagle3_config import config_ids

    deepest = max(config_ids(raw)[0] or [0])   # eagle_config / top-level ids / target_layer_ids, as a fusion reads them
    hidden = int(raw.get("target_hidden_size") or draft_cfg.hidden_size)
    hidden *= 1 + (guess == "width")
    # a config without vocab_size: its draft_vocab_size, not transformers' default (32000), which would make the
    # draft's head a reduced one and its d2t / t2d missing
    vocab = int(raw.get("vocab_size") or raw.get("draft_vocab_size") or draft_cfg.vocab_size)
    other = guess == "other"
    extra = {"hc_mult": raw["hc_mult"]} if isinstance(raw.get("hc_mult"), int) else {}
    return LlamaConfig(vocab_size=vocab * (1 + (guess == "vocab")), hidden_size=hidden,
                       num_hidden_layers=max(STAND_IN_LAYERS, deepest + 1) + other, num_attention_heads=1 + other,
                       num_key_value_heads=1 + other, intermediate_size=1 + 2 * other, **extra)


@dataclass(frozen=True)
class Fit:
    """What the model a folder's proposed spec builds (with a stand-in target) says of the folder's tensors."""
    misfits: dict[str, str]   # canonical name -> 'missing' / 'unexpected' / 'colliding' (names only)
    refused: list[str]        # "tensor 'NAME' is int32 (int) in the checkpoint, ..." (dtypes: the checkpoint's own,
    # and shapes the draft's config alone decides)
    names: dict[str, str] = field(default_factory=dict)   # canonical name -> the folder's tensor name it reads
    read_as: dict[str, list[str]] = field(default_factory=dict)   # a missing name -> the names it would be read
    # from (the preimages under the rules the folder's names went through: fc_norm.0.weight for fc.aux_norm.0.weight)
    # a vocabulary size its config states that its tensors contradict (vocab.config_contradictions: a load's words)
    contradictions: list[str] = field(default_factory=list)


def fit(folder: Path, spec_data: Mapping[str, Any], registry=None) -> Fit | None:
    """The folder's tensors against the model ``spec_data`` builds with a stand-in target: the names it would
    refuse, and the tensors whose dtype assemble() would refuse (the load plan's rule, plan.wrong_dtype) or whose
    shape it would, in each dimension the draft's config alone decides (stand-ins guessing otherwise build it alike),
    a d2t / t2d that form no sound map, and a draft no stand-in builds (the first one's reason said: the draft's
    config refused: a reduced head with the target's lm_head, taps fc does not take). Dtypes are the checkpoint's
    own, not a stand-in's guess, so they are always judged. None when no stand-in can be built for it."""
    from draftsmith.assembler.plan import wrong_dtype
    from draftsmith.assembler.vocab import config_contradictions, held_shapes

    if (judged := stand_in_model(folder, spec_data, registry)) is None or isinstance(judged, Fit):
        return judged
    remap, expected, infos, rules, others, extras = judged
    optional, unused, vocab_map, raw = extras
    found = {c: "unexpected" for c in remap.mapping if c not in expected and c not in unused}
    found |= {c: "missing" for c in expected if c not in remap.mapping and c not in remap.collisions
              and c not in optional}
    refused = [f"tensor {name!r} {why}" for canon, (name, _) in remap.mapping.items()
               if canon in expected and (why := wrong_dtype(infos[name].dtype, expected[canon].dtype))]
    for canon, (name, _) in remap.mapping.items():
        want, got = expected.get(canon), tuple(infos[name].shape)
        if want is None or got in want.also or len(rules.to_parts(name)[0] or ()) > 1:
            continue   # a shape it also takes, or a split tensor's part (the split's rule judges it): not judged
        if (dims := _decided(canon, want.shape, others)) is not None and (
                len(got) != len(dims) or any(d is not None and g != d for g, d in zip(got, dims))):
            said = "[" + ", ".join("*" if d is None else str(d) for d in dims) + "]"
            refused.append(f"tensor {name!r} is {list(got)} in the checkpoint, the model its config describes "
                           f"expects {said}" + (" (*: the target's to decide)" if None in dims else ""))
    used = remap.used_rules
    return Fit(found | {c: "colliding" for c in remap.collisions}, refused + vocab_map,
               {canon: name for canon, (name, _) in remap.mapping.items()},
               {c: names for c, why in found.items() if why == "missing" and (names := rules.preimages(c, used))},
               config_contradictions(raw, held_shapes(remap, infos)))


def _decided(canon: str, shape: tuple[int, ...], others: Mapping[str, Mapping[str, Any] | None]
             ) -> tuple[int | None, ...] | None:
    """Each dimension of ``canon`` the draft's config alone decides (None in a dimension the stand-ins guessing
    otherwise build unlike, ``others``: guess -> what its model expects, None where it did not build); None when not
    even the rank is decided. A guess whose model does not build is no guess (no target it describes loads the
    draft: a draft sharing the target's embedding is the target's width), except ``other``: a draft that builds
    only with one head and MLP guess is judged on nothing."""
    if others.get("other") is None:
        return None
    shapes = [shape] + [exp[canon].shape if canon in exp else None for exp in others.values() if exp is not None]
    if any(s is None or len(s) != len(shape) for s in shapes):
        return None
    return tuple(d if all(s[i] == d for s in shapes) else None for i, d in enumerate(shape))


def proposed_fit(found, registry=None) -> Fit | None:
    """:func:`fit` of an inspected folder (``found``: convert.inspect's Inspection) against the spec inspect
    proposes for it; None when none is proposed."""
    return None if found.spec is None else fit(found.folder, found.spec, registry)


def stand_in_model(folder: Path, spec_data: Mapping[str, Any], registry=None):
    """(the folder's names through the spec's rules, the expected names and dtypes of the model the spec builds with
    a stand-in target, the folder's tensor listing, the rules, what each stand-in guessing otherwise expects (None
    where its model does not build), (the names it may leave out, those it may hold unread, the d2t / t2d map's
    problems as refusals, the folder's config as read, which fit reads no second time)); a Fit refusing the draft
    where every stand-in's build refuses it; None when no stand-in can be built for it."""
    from draftsmith.assembler.build import held_d2t_rows, rule_set
    from draftsmith.assembler.checkpoint import list_tensors
    from draftsmith.assembler.config import draft_hf_config, flatten_draft_config, read_config
    from draftsmith.assembler.load import optional_and_unused
    from draftsmith.assembler.plan import expected_of
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import parse_spec

    registry = registry or default_registry()
    spec = parse_spec(dict(spec_data), source=f"the spec inspect proposes for {folder}", registry=registry)
    raw, infos = read_config(folder), list_tensors(folder)
    facts = flatten_draft_config(raw)
    rules = rule_set(spec, registry, facts)
    remap = rules.remap(infos)
    draft_cfg = draft_hf_config(raw, folder / "config.json")   # read as assemble() reads it: its errors are real
    names = list(remap.mapping) + list(remap.collisions)
    d2t_rows = held_d2t_rows(rules, infos)

    def every(facts):
        return {guess: _built(spec, registry, raw, draft_cfg, names, guess, facts, d2t_rows=d2t_rows)
                for guess in ("", *GUESSES)}

    if (own := _own_target(folder, infos)) is not None:   # its own target: every size is known, none guessed
        model = _built(spec, registry, raw, draft_cfg, names, "", facts, own, d2t_rows)
        models = dict.fromkeys(GUESSES, model)
    else:
        models = every(facts)
        if isinstance(models[""], str) and facts.get("target_hidden_size") not in (None, draft_cfg.hidden_size):
            models = every({k: v for k, v in facts.items() if k != "target_hidden_size"})   # loads take the real
            # target's width, which target_hidden_size does not decide: a 64-wide draft sharing the embedding loads
        model = models.pop("")
    if isinstance(model, str):   # every guess refuses it too: the draft's own config does (the first's reason said)
        on = ("its own target (this folder's config)" if own is not None else "any stand-in target (the first: "
              f"{stand_in_target(facts, draft_cfg).num_hidden_layers} layers, the draft config's width and vocabulary)")
        return Fit({}, [f"the draft does not build on {on}: {model}"]) \
            if all(isinstance(m, str) for m in models.values()) else None
    if model is None:
        return None
    expected = expected_of(model)
    others = {guess: expected if m is model else None if m is None or isinstance(m, str) else expected_of(m)
              for guess, m in models.items()}   # its own target's model is every guess's
    extras = (*optional_and_unused(model), _map_problems(spec, model, remap, infos, folder), raw)
    return remap, expected, infos, rules, others, extras


def _own_target(folder: Path, infos) -> Any:
    """The folder's own config as a target's, where the folder holds a whole model (an MTP layer inside its target:
    the draft's target is known); None otherwise, or where transformers cannot read it."""
    from draftsmith.assembler.config import target_hf_config
    from draftsmith.assembler.detect import full_model

    if not full_model(list(infos)):
        return None
    try:
        return target_hf_config(folder)
    except DraftsmithError:
        return None


def _built(spec, registry, raw: Mapping[str, Any], draft_cfg, names: list[str], guess: str,
           facts: Mapping[str, Any], target=None, d2t_rows: int | None = None):
    """The draft ``spec`` builds (on meta) with the stand-in target ``guess`` describes from the config's ``facts``
    (``target``: the real one, where it is known; ``d2t_rows``: as assemble() passes it); the build's refusal in one
    line where it refuses; None where no stand-in can be made."""
    from draftsmith.assembler.build import build_draft
    from draftsmith.assembler.explain import quiet_notes
    from draftsmith.components.backends import eager

    try:
        stand_in = target or stand_in_target(facts, draft_cfg, guess)
    except Exception:  # noqa: BLE001 (transformers' own config checks): no stand-in, nothing judged
        return None
    try:
        with quiet_notes():   # the stand-in's own notes (taps "for a 64-layer target") are about no real target
            return build_draft(spec, registry, draft_raw=raw, draft_cfg=draft_cfg, target_cfg=stand_in,
                               canonical_names=names, backend=eager, d2t_rows=d2t_rows)
    except (DraftsmithError, ValueError, TypeError) as e:   # this guess does not fit the draft
        said = [f"{p.path}: {p.message}" for p in e.problems] if isinstance(e, SpecError) else [str(e)]
        return " ".join("; ".join(said).split())


def _map_problems(spec, model, remap, infos, folder: Path) -> list[str]:
    """The d2t / t2d map as assemble() checks it (assembler.vocab.check_vocab_tensors: nothing where they are
    missing or misshapen, which the names and shapes say), as one refusal line; [] when sound or not there."""
    from draftsmith.assembler.explain import quiet_notes
    from draftsmith.assembler.vocab import VocabMapError, check_vocab_tensors

    sources = {canon: name for canon, (name, _) in remap.mapping.items() if canon in ("d2t", "t2d")}
    try:
        with quiet_notes():   # a folder without t2d: assemble()'s note, no news here
            check_vocab_tensors(spec, model, sources, infos, folder)
    except VocabMapError as e:
        names = " / ".join(repr(n) for n in sources.values())
        return [f"{names} form no sound draft-to-target map: " + "; ".join(x.strip() for x in str(e).splitlines()[1:])]
    return []


def introduced_misfits(before: Fit | None, written, registry=None) -> list[str]:
    """'unexpected: NAME' lines for what the written draft's proposed spec refuses by name and the source's did
    not (``before``: the source's :func:`proposed_fit`; ``written``: the output's Inspection); [] when either
    cannot be judged."""
    after = proposed_fit(written, registry)
    if before is None or after is None:
        return []
    return [f"{why}: {name!r}" for name, why in sorted(after.misfits.items()) if before.misfits.get(name) != why]
