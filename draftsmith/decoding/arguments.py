"""Checks of ``generate()`` / ``generate_baseline()`` arguments, all at once, before anything runs.

Prompts are encoded and checked in :mod:`draftsmith.decoding.prompts` (:func:`check_call` lists their problems too).

Per-call decoding overrides (topk, steps, draft_tokens, mode) are validated with the spec's own ``Decoding`` model,
strictly, and its cross-field rules, so a call gets exactly the checks a spec gets, in ``generate()`` and in
``SpeculativeModel.plan()`` alike; draft_tokens is not refused for a chain (topk 1), where it does not apply (one
dict of keywords serves a sweep over trees and chains; a spec, which states one plan, is held to 2..steps + 1).
Sampling settings are checked here too: temperature 0 or finite and at least float32's smallest normal number, top_p
in (0, 1], top_k in 0..vocab, max_new_tokens an integer >= 1, a seed torch accepts, stop ids that are integers (a
list, or a 1-D integer tensor or array).
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import torch
from pydantic import ValidationError

from draftsmith.components.rope import position_problems
from draftsmith.decoding.modes import RECURRENT, V2
from draftsmith.decoding.prompts import MOST, context_problems, encode_prompts
from draftsmith.decoding.settings import number_problems
from draftsmith.values import array_like, integer_vector, is_int, scalar
from draftsmith.errors import ArgumentError, Problem, short
from draftsmith.specs.resolve import decoding_problems, is_chain
from draftsmith.specs.schema import Decoding, validate_strict
from draftsmith.specs.translate import problems_from

def stop_ids(stop: Any, most: int | None = None) -> Any:
    """``stop`` read once: a list of an iterable (an iterator or generator is consumed here, so that the checks and
    the decoding see the same ids; a 1-D integer tensor or array gives Python ints, as a prompt does), anything
    else as it is (the checks refuse it: a 0-D or 2-D tensor, a float one). ``most`` (the vocabulary's size): at
    most one id more is read, and a sized ``stop`` longer than that is left unread, for the checks to refuse its
    length (``itertools.count()`` was read until memory ran out, a ``range(10**8)`` for seconds)."""
    if stop is None or isinstance(stop, (str, bytes)) or not isinstance(stop, Iterable):
        return stop
    if array_like(stop):   # a vector longer than ``most`` left unread, as a sized iterable is
        return stop.tolist() if integer_vector(stop) and (most is None or len(stop) <= most) else stop
    if most is None:
        return list(stop)
    if hasattr(stop, "__len__") and len(stop) > most:
        return stop
    return list(itertools.islice(stop, most + 1))


def settings_problems(max_new_tokens: Any, temperature: Any, top_p: Any, top_k: Any, seed: Any, stop: Any, *,
                      vocab: int, names: Mapping[str, str] | None = None) -> list[str]:
    """The sampling settings' problems (:func:`draftsmith.decoding.settings.number_problems`, then stop's);
    ``names`` renames the arguments in them (the command line's options, e.g. ``--seed``). Only top_k and stop are
    checked against ``vocab``."""
    out = number_problems(max_new_tokens, temperature, top_p, top_k, seed, vocab=vocab, names=names)
    name = (names or {}).get("stop", "stop")
    stop = stop_ids(stop, vocab)   # as generate() reads it (idempotent): a 1-D integer tensor or array as a list
    if stop is not None:
        unread = array_like(stop) and integer_vector(stop)   # a vector stop_ids left unread: longer than vocab
        if not unread and (isinstance(stop, (str, bytes)) or not isinstance(stop, Iterable) or array_like(stop)):
            # an array-like here is one stop_ids left alone: 0-D, 2-D or not integers
            shape = f" (a {stop.ndim}-D array of {stop.dtype})" if array_like(stop) else ""
            out.append(f"{name} is {short(stop)}{shape}; a list of token ids (or a 1-D integer tensor or "
                       "array) is expected")
        elif unread or (hasattr(stop, "__len__") and len(stop) > vocab):   # more stop ids than tokens
            out.append(f"{name} holds more than {vocab} ids; the vocabulary has {vocab} tokens")
        elif bad := [t for t in stop if not is_int(t) or t < 0]:
            out.append(f"{name} holds {short(bad[:MOST])}; stop token ids are integers >= 0")
        elif bad := [t for t in stop if t >= vocab]:   # an id from another tokenizer: it could never stop anything
            out.append(f"{name} holds ids outside the model's vocabulary 0..{vocab - 1}: {short(bad[:MOST])}")
    return out


def _rendered(problems: list[Problem], names: Mapping[str, str] | None) -> list[str]:
    """Problems of the overrides as text, each field under the name its caller knows it by (e.g. ``--topk``)."""
    out = []
    for p in problems:
        field = p.path.lstrip(".")
        out.append(replace(p, path=(names or {}).get(field, field)).render(short).strip())
    return out


def overridden(spec_decoding: Decoding, overrides: dict[str, Any], problems: list[str], *,
               draft_vocab: int, names: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The spec's decoding section with the per-call overrides (None leaves a field as the spec has it), checked
    like a spec: strict types and bounds, modes, topk within the draft's vocabulary, then the cross-field rules.
    Numpy integers and 0-d tensors count as numbers (as for max_new_tokens and top_k). For a chain (topk 1)
    draft_tokens does not apply: it becomes steps + 1 and is never refused by a cross-field rule; so for mode v1 and
    for auto with a page_size past 1, which run a chain whatever topk says. ``names`` renames fields in the
    problems (the command line's option names). Returns the fields, or None with every reason appended to
    ``problems``."""
    given = {k: scalar(v) for k, v in overrides.items() if v is not None}   # numpy ints and 0-d tensors too
    dec = spec_decoding
    if given:
        data = {**spec_decoding.model_dump(mode="json"), **given}
        try:
            dec = validate_strict(Decoding, data)
        except ValidationError as e:
            problems += _rendered(problems_from(e, "", Decoding, word=short, data=data), names)
            return None
    if dec.topk > draft_vocab:
        problems += _rendered([Problem("topk", f"{dec.topk} candidates per node, but the draft's vocabulary has "
                                               f"{draft_vocab} tokens")], names)
        return None
    fields = dec.model_dump()
    if is_chain(fields["topk"], fields["mode"], fields["page_size"]):
        fields["draft_tokens"] = fields["steps"] + 1   # a chain (choose_mode's v1): draft_tokens does not apply
    def spec_value(p: Problem) -> Problem:   # a field the call left as the spec has it: said so (steps=1 alone was
        # told "draft_tokens: 8 tokens cannot be drafted", a value the caller never gave)
        field = p.path.lstrip(".")
        if field in given or field not in fields:
            return p
        name = (names or {}).get(field, field)
        return replace(p, message=f"{p.message} ({fields[field]}: the spec's {name}; pass {name} too)")

    cross = _rendered([spec_value(p) for p in decoding_problems(fields, path="")], names)
    problems += cross
    return None if cross else fields


def check_overrides(model: Any, *, topk: Any = None, steps: Any = None, draft_tokens: Any = None, mode: Any = None,
                    what: str, names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The decoding fields of a call with these overrides (see :func:`overridden`); ArgumentError lists every
    problem."""
    problems: list[str] = []
    fields = overridden(model.spec.decoding, dict(topk=topk, steps=steps, draft_tokens=draft_tokens, mode=mode),
                        problems, draft_vocab=vocab_sizes(model)[1], names=names)
    if fields is not None and fields["mode"] == "v2" and getattr(model, "recurrent", False):
        problems.append(f"{(names or {}).get('mode', 'mode')}: {V2} is unsupported here: {RECURRENT}; auto falls "
                        "back to v1")
        fields = None
    if fields is None:
        raise ArgumentError(what, problems)
    return fields


def draft_vocab_size(draft: Any, target_vocab: int) -> int:
    """The ids a draft proposes among: its d2t's length (a reduced vocabulary), else the target's vocabulary."""
    d2t = getattr(draft, "d2t", None)
    return int(d2t.shape[0]) if d2t is not None else int(target_vocab)


def vocab_sizes(model: Any) -> tuple[int, int, int | None]:
    """(target vocabulary, draft vocabulary, target context or None) of a SpeculativeModel."""
    vocab = int(model.target.model.embed_tokens.num_embeddings)
    draft_vocab = draft_vocab_size(model.draft, vocab)
    dims = getattr(model.target, "dims", None)
    context = getattr(getattr(dims, "config", None), "max_position_embeddings", None)
    return vocab, draft_vocab, (int(context) if is_int(context) and context > 0 else None)


def check_call(model: Any, prompt: Any, *, max_new_tokens: Any = 64, temperature: Any = 0.0, top_p: Any = 1.0,
               top_k: Any = 0, seed: Any = None, stop: Any = None, topk: Any = None, steps: Any = None,
               draft_tokens: Any = None, mode: Any = None, what: str = "generate()",
               names: Mapping[str, str] | None = None) -> tuple[list[list[int]], bool]:
    """Encode the prompts and check every argument; ArgumentError lists all problems, each argument under its
    name in ``names`` where it has one (the command line's options). Returns (prompts, single)."""
    vocab, draft_vocab, context = vocab_sizes(model)
    problems: list[str] = []
    prompts, single = encode_prompts(prompt, tokenizer=model.tokenizer, vocab=vocab, context=context,
                                     problems=problems, names=names, max_new_tokens=max_new_tokens)
    problems += settings_problems(max_new_tokens, temperature, top_p, top_k, seed, stop, vocab=vocab, names=names)
    overridden(model.spec.decoding, dict(topk=topk, steps=steps, draft_tokens=draft_tokens, mode=mode), problems,
               draft_vocab=draft_vocab, names=names)
    problems += context_problems(prompts, max_new_tokens, context, names)
    if prompts and is_int(max_new_tokens) and max_new_tokens >= 1:   # else refused on their own
        # positions past those the target's rotary embedding computes as transformers does (a longrope target)
        problems += position_problems(model.target, max(map(len, prompts)), int(max_new_tokens),
                                      (names or {}).get("max_new_tokens", "max_new_tokens"))
    pairing = pairing_problems(model)
    problems += pairing or placement_problems(model)
    if problems:
        raise ArgumentError(what, problems)
    return prompts, single


def pairing_problems(model: Any) -> list[str]:
    """A target or draft rebound on the model (``model.draft = other``) that is no module, or a draft made for
    another target (its fusion reads states of another width, taps layers the target lacks, or maps into another
    vocabulary): said here, where it failed inside the first forward as a raw matmul error."""
    parts = {"target": model.target, "draft": model.draft}
    out = [f"model.{name} is {short(part)}, not a torch module: assemble a pair with draftsmith.assemble()"
           for name, part in parts.items() if not isinstance(part, torch.nn.Module)]
    if out:
        return out
    embed, layers = model.target.model.embed_tokens, len(model.target.model.layers)
    width = getattr(getattr(model.draft, "fc", None), "target_width", None)   # a plugin fusion may not say it
    found = {"hidden states of width": (width, embed.embedding_dim),
             "a vocabulary of": (getattr(model.draft, "target_vocab", None), embed.num_embeddings)}
    made = [f"{what} {mine} (the target's: {theirs})" for what, (mine, theirs) in found.items()
            if is_int(mine) and mine != theirs]
    if (past := [t for t in getattr(model.draft, "taps", None) or () if is_int(t) and not 0 <= t <= layers]):
        made.append(f"taps {past} (the target's: 0..{layers}, its layer count the last state)")
    if made:
        out.append(f"the draft was made for another target ({'; '.join(made)}): a draft rebound on a model must "
                   "be one assembled for its target (draftsmith.assemble(spec, target=..., draft=...))")
    return out


def placement_problems(model: Any) -> list[str]:
    """The target and the draft where ``assemble()`` put them (``model.device``, ``model.dtype``, the draft's
    ``draft_dtype``): one moved or cast afterwards (``model.target.to(torch.bfloat16)``, or one of its layers)
    would meet KV pools of the assembled dtype inside its first forward, as a raw matmul error. Read off every
    floating-point parameter wider than a byte (FP8 weights keep their own dtype; scales are buffers); the first
    one placed otherwise is named. The parameters are listed once and checked by identity at each call (walking
    the modules was most of the cost: 0.5-1.5 ms a call for SmolLM2); a module or parameter swapped in since is
    listed again."""
    out = []
    kind, _, index = str(model.device).partition(":")
    for name, module, dtype in (("target", model.target, model.dtype),
                                ("draft", model.draft, model.draft_dtype or model.dtype)):
        def off(device) -> bool:   # cpu:N is the CPU (its tensors carry no index); cuda:N is that GPU
            return device.type != kind or (kind != "cpu" and index != "" and device.index != int(index))

        params, typed = _floating(model, name, module)   # read as sets: a third of the time of a test per parameter
        if {p.dtype for p in typed} <= {dtype} and not any(map(off, {p.device for p in params})):
            continue
        # the lists are the module's as it is now (_floating): the parameter found there is found here, named
        typed_ids = set(map(id, typed))
        at, p = next((at, p) for at, p in module.named_parameters()
                     if p.is_floating_point() and p.element_size() > 1
                     and ((id(p) in typed_ids and p.dtype != dtype) or off(p.device)))
        out.append(f"the {name}'s weights are {str(p.dtype).removeprefix('torch.')} on {p.device} ({at}, the first "
                   f"so), but the model was assembled for {str(dtype).removeprefix('torch.')} on {model.device} (its "
                   "KV pools follow that): call draftsmith.assemble(..., device=, dtype=) again instead of moving or "
                   "casting a model or a part of it")
    return out


def _floating(model: Any, name: str, module: Any) -> tuple[tuple, tuple]:
    """(``module``'s floating-point parameters wider than a byte, those of them placed by the assembled dtype: all but
    the ones a module keeps in a dtype of its own, ``kept_dtypes``): the lists kept on ``model`` (its ``name`` slot:
    the target's or the draft's) while every module and parameter they were made from is still where it was (a plain
    cast changes a parameter in place; the overwriting one, an assigned load, a new head do not) and none was
    added (a dict grown: ``register_parameter`` or ``add_module`` under a new name), else anew."""
    cache = getattr(model, "_params", None)
    kept = None if cache is None else cache.get(name)
    if kept is not None and kept[0] is module and all(len(d) == n for d, n in kept[1]) \
            and all(d.get(k) is v for d, k, v in kept[2]):
        return kept[3]
    owners = list(module.modules())
    sizes = [(d, len(d)) for owner in owners for d in (owner._modules, owner._parameters)]
    places = [(d, key, v) for d, _ in sizes for key, v in d.items()]
    own = _kept(owners)
    found = tuple(v for _, _, v in places if isinstance(v, torch.Tensor) and v.is_floating_point()
                  and v.element_size() > 1)
    lists = (found, tuple(v for v in found if id(v) not in own))
    if cache is not None:
        cache[name] = (module, sizes, places, lists)
    return lists


def _kept(owners: list) -> set[int]:
    """The parameters ``owners`` (a model's modules) keep in a dtype of their own whatever the model's
    (``kept_dtypes``: an MoE router's float32 weight, as transformers keeps DeepSeek-V3's), by identity: not placed
    by the assembled dtype (their device is)."""
    return {id(p) for owner in owners for key in getattr(owner, "kept_dtypes", {})
            if isinstance(p := owner._parameters.get(key), torch.Tensor)}
