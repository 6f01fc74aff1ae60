"""Checks of ``generate()`` / ``generate_baseline()`` arguments, all at once, before anything runs.

Prompts: a str (needs the target's tokenizer), a sequence of token ids, a 1-D integer torch tensor or numpy array, a
conversation (a list of ``{"role", "content"}`` messages, rendered by the target tokenizer's chat template with the
generation prompt, see :mod:`draftsmith.chat`), or a list of those (a batch). Everything else is refused: bytes,
floats, booleans, 2-D tensors, float tensors, an empty list. Every id must be inside the target's vocabulary, also
the ids a tokenizer produced (its vocabulary may be larger than the model's). A prompt longer than the target's
context is refused (a conversation by the tokens its template renders, not by its messages), and so is a call whose
prompt + max_new_tokens runs past it (the KV pools are sized for that length up front).

Per-call decoding overrides (topk, steps, draft_tokens, mode) are validated with the spec's own ``Decoding`` model,
strictly, and its cross-field rules, so a call gets exactly the checks a spec gets, in ``generate()`` and in
``SpeculativeModel.plan()`` alike; draft_tokens is not refused for a chain (topk 1), where it does not apply (one
dict of keywords serves a sweep over trees and chains; a spec, which states one plan, is held to 2..steps + 1).
Sampling settings are checked here too: temperature 0 or finite and at least float32's smallest normal number, top_p
in (0, 1], top_k in 0..vocab, max_new_tokens an integer >= 1, a seed torch accepts, stop ids that are integers (a
list, or a 1-D integer tensor or array).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from draftsmith import limits
from draftsmith.chat import (conversation_ids, is_conversation, message_problems, nested_strings, template_problem,
                             texts, written_size)
from draftsmith.components.rope import position_problems
from draftsmith.decoding.modes import RECURRENT, V2
from draftsmith.errors import ArgumentError, Problem, short
from draftsmith.specs.resolve import decoding_problems, is_chain
from draftsmith.specs.schema import Decoding, validate_strict
from draftsmith.specs.translate import problems_from

SEED_RANGE = (-(1 << 63), (1 << 64) - 1)   # what torch.Generator.manual_seed accepts
TINY_TEMPERATURE = 2.0 ** -126               # torch.finfo(torch.float32).tiny, without importing torch here
HUGE_TEMPERATURE = (2 - 2.0 ** -23) * 2.0 ** 127   # torch.finfo(torch.float32).max
MOST = 8                                     # problems listed per prompt

FORMS = ("a str, a list of token ids, a 1-D integer tensor or numpy array, a conversation (a list of "
         "{'role', 'content'} messages), or a list of those (a batch)")


def _is_int(v: Any) -> bool:
    # the exact-type test first: an ABC isinstance costs ~1 us, per token of a long prompt
    return type(v) is int or (isinstance(v, numbers.Integral) and not isinstance(v, bool))


def _is_finite(v: Any) -> bool:
    # a real number a float holds finitely (an integer past float's range is not: 10**400 overflows)
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _array_ids(p: Any, where: str, problems: list[str]) -> list[int] | None:
    """A 1-D integer tensor or numpy array as a list of ids; anything array-like and else, a problem."""
    kind = "tensor" if type(p).__module__.startswith("torch") else "array"
    a = "an" if kind == "array" else "a"
    dtype = str(p.dtype).removeprefix("torch.")
    if p.ndim != 1:
        problems.append(f"{where}: a {p.ndim}-D {kind} of shape {list(p.shape)}; a prompt is 1-D (pass a list of "
                        "1-D prompts for a batch)")
        return None
    if not _integer_vector(p):
        problems.append(f"{where}: {a} {kind} of {dtype}; token ids are integers")
        return None
    return [int(t) for t in p.tolist()]


def _ids(p: Any, where: str, tokenizer: Any, problems: list[str], context: int | None = None) -> list[int] | None:
    """One prompt as ids, or None with the reasons appended to ``problems``. A sequence or array longer than the
    context is refused by its length alone, before each token is looked at (past the first, which tells it from a
    conversation); a conversation's length is its messages, not its tokens: it is checked once rendered
    (:func:`encode_prompts`)."""
    if is_conversation(p):   # reads an id list's first item only: it is not a message
        return _conversation_ids(p, where, tokenizer, problems)
    if isinstance(p, (bytes, bytearray, memoryview)):   # before the length check: their length is bytes, not tokens
        problems.append(f"{where}: bytes; a prompt is text (decode the bytes first) or token ids")
        return None
    # a sequence or array only: a set or mapping is no prompt at any length (said below, not as tokens)
    if context is not None and not isinstance(p, str) and (isinstance(p, Sequence) or _array_like(p)) and \
            _longer(p, context):
        problems.append(_past_context(where, len(p), context))
        return None
    if isinstance(p, str):
        if (bad := _not_unicode(p)) is not None:
            problems.append(f"{where}: a lone surrogate at character {bad}; a prompt is Unicode text")
            return None
        if tokenizer is None:
            problems.append(f"{where}: a text prompt needs a tokenizer in the target folder; pass token ids "
                            "instead (the CLI: --token-ids 1,2,3)")
            return None
        return [int(t) for t in tokenizer.encode(p)]
    if _array_like(p):
        return _array_ids(p, where, problems)
    if not isinstance(p, Sequence):
        problems.append(f"{where}: {short(p)} ({type(p).__name__}) is not a prompt; a prompt is {FORMS}")
        return None
    bad = [(i, t) for i, t in enumerate(p) if not _is_int(t)]
    for i, t in bad[:MOST]:
        problems.append(f"{where}: token {i} is {short(t)} ({type(t).__name__}); token ids are integers")
    return None if bad else [int(t) for t in p]


def _conversation_ids(p: Sequence[Mapping], where: str, tokenizer: Any, problems: list[str]) -> list[int] | None:
    """A conversation prompt's ids (:func:`draftsmith.chat.conversation_ids`), or None with the reasons appended;
    one of more than ``limits.MESSAGES`` messages is refused by its length, before a message is read."""
    if len(p) > limits.MESSAGES:
        problems.append(f"{where}: a conversation of {len(p)} messages; at most {limits.MESSAGES} are read (its "
                        "tokens must also fit the target's context once rendered)")
        return None
    if (why := template_problem(tokenizer)) is not None:
        problems.append(f"{where}: {why}")
        return None
    if (size := written_size(p, limits.MESSAGE_VALUES)) is None or size > limits.MESSAGE_VALUES:
        what = "holds itself (a message or tool call inside its own value)" if size is None else \
            f"holds more than {limits.MESSAGE_VALUES} values as its template writes them (a part held twice " \
            "counts twice)"
        problems.append(f"{where}: a conversation that {what}; a conversation is a tree of strings, numbers, "
                        "lists and mappings")
        return None
    if bad := message_problems(p, where):
        problems += bad[:MOST]
        return None
    # its strings (role, content, name, ..., and those inside a tool call's lists and mappings, which go to the
    # template as they are)
    seen: set[int] = set()   # a part several messages hold is walked once
    if bad := [i for i, m in enumerate(texts(p)) if any(_not_unicode(v) is not None for v in nested_strings(m, seen))]:
        problems.append(f"{where}: message {bad[0]} holds a lone surrogate; a message is Unicode text")
        return None
    try:
        return conversation_ids(tokenizer, p)
    except ValueError as e:
        problems.append(f"{where}: {e}")
        return None


def _past_context(where: str, tokens: int, context: int, messages: int | None = None) -> str:
    # a prompt longer than the context: said alike whether its length was seen before its tokens or after encoding;
    # a conversation (``messages``) is said with what its template rendered it to
    what = f"{tokens} tokens" if messages is None else \
        f"a conversation of {messages} message{'s' * (messages != 1)} rendered to {tokens} tokens"
    return f"{where}: {what}; the target's context (max_position_embeddings) is {context}"


def _not_unicode(text: str) -> int | None:
    # the index of a lone surrogate (a str Python holds but no tokenizer takes), or None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return None


def _longer(p: Any, context: int) -> bool:
    try:
        return len(p) > context and getattr(p, "ndim", 1) == 1
    except TypeError:   # a 0-d array has no len
        return False


def split_prompts(prompt: Any) -> tuple[list[Any], bool]:
    """(prompts, single): a batch is a list or tuple of prompts (str, sequences, arrays, conversations); a list of
    mappings is one conversation; a list of scalars (numbers, even wrong ones such as 1.5) is one prompt, whose
    wrong ids are then reported one by one."""
    if is_conversation(prompt):   # a list of messages is one prompt; a list of conversations, a batch
        return [prompt], True
    # by the distinct types of the items (one C-level pass: a 10M-token list takes 0.2 s, not 1.5)
    if isinstance(prompt, (list, tuple)) and prompt and not all(issubclass(t, numbers.Number)
                                                                for t in set(map(type, prompt))):
        return list(prompt), False
    return [prompt], True


def encode_prompts(prompt: Any, *, tokenizer: Any, vocab: int, context: int | None, problems: list[str],
                   names: Mapping[str, str] | None = None) -> tuple[list[list[int]], bool]:
    """Every prompt as token ids (problems appended for each one that is not usable); ``names`` renames the
    argument in them (the command line's option, e.g. ``--token-ids``)."""
    name = (names or {}).get("prompt", "prompt")
    if isinstance(prompt, (list, tuple)) and len(prompt) == 0:
        problems.append(f"{name}: an empty list is neither a prompt (no token ids) nor a batch (no prompts)")
        return [], True
    items, single = split_prompts(prompt)
    if len(items) > limits.BATCH:   # each prompt is a row of the KV pools, allocated up front
        problems.append(f"{name}: a batch of {len(items)} prompts; at most {limits.BATCH} in one call")
        return [], single
    out = []
    for i, p in enumerate(items):
        where = name if single else f"{name} {i}"
        ids = _ids(p, where, tokenizer, problems, context)
        if ids is None:
            continue
        if not ids:
            problems.append(f"{where}: no tokens; a prompt needs at least one")
            continue
        outside = [t for t in ids if not 0 <= t < vocab]
        if outside:
            who = "the tokenizer produced" if isinstance(p, str) or is_conversation(p) else "it holds"
            problems.append(f"{where}: {who} ids outside the model's vocabulary 0..{vocab - 1}: "
                            f"{short(sorted(set(outside))[:MOST])}")
            continue
        if context is not None and len(ids) > context:
            problems.append(_past_context(where, len(ids), context, len(p) if is_conversation(p) else None))
            continue
        out.append(ids)
    return out, single


def context_problems(prompts: list[list[int]], max_new_tokens: Any, context: int | None,
                     names: Mapping[str, str] | None = None) -> list[str]:
    """A call that would feed the target a position past its context is refused: the KV pools are sized for
    prompt + max_new_tokens before the first forward, so the context (not a user value up to limits.NEW_TOKENS)
    bounds what is allocated and how long a call runs; positions past it are outside what the target was trained
    on anyway. The last new token is never fed (as in transformers), so prompt + max_new_tokens may pass the
    context by one: a prompt of the whole context gets its one next token. ``names`` renames max_new_tokens."""
    if context is None or not prompts or not _is_int(max_new_tokens) or max_new_tokens < 1:
        return []  # no context declared, no usable prompt, or no count of tokens (refused on its own)
    longest = max(map(len, prompts))
    if longest + max_new_tokens - 1 <= context or longest > context:   # a longer prompt is refused on its own
        return []
    name = (names or {}).get("max_new_tokens", "max_new_tokens")
    return [f"{name} is {short(max_new_tokens)}: with a {longest}-token prompt it runs past the target's "
            f"context of {context} tokens (max_position_embeddings); at most {context - longest + 1} new tokens fit "
            "(the last one is never fed)"]


def stop_ids(stop: Any) -> Any:
    """``stop`` read once: a list of an iterable (an iterator or generator is consumed here, so that the checks and
    the decoding see the same ids; a 1-D integer tensor or array gives Python ints, as a prompt does), anything
    else as it is (the checks refuse it: a 0-D or 2-D tensor, a float one)."""
    if stop is None or isinstance(stop, (str, bytes)) or not isinstance(stop, Iterable):
        return stop
    if _array_like(stop):
        return stop.tolist() if _integer_vector(stop) else stop
    return list(stop)


def _array_like(v: Any) -> bool:
    return hasattr(v, "ndim") and hasattr(v, "dtype") and hasattr(v, "tolist")


def _integer_vector(a: Any) -> bool:
    # a 1-D tensor or numpy array of integers (int8..int64, uint8..uint64; not bool, str or object)
    return a.ndim == 1 and str(a.dtype).removeprefix("torch.").startswith(("int", "uint"))


def settings_problems(max_new_tokens: Any, temperature: Any, top_p: Any, top_k: Any, seed: Any, stop: Any, *,
                      vocab: int, names: Mapping[str, str] | None = None) -> list[str]:
    """The sampling settings' problems; ``names`` renames the arguments in them (the command line's options, e.g.
    ``--seed``). Only top_k and stop are checked against ``vocab``."""
    out = []
    n = {f: (names or {}).get(f, f) for f in ("max_new_tokens", "temperature", "top_p", "top_k", "seed", "stop")}
    if not _is_int(max_new_tokens) or not 1 <= max_new_tokens <= limits.NEW_TOKENS:
        out.append(f"{n['max_new_tokens']} is {short(max_new_tokens)}; an integer in 1..{limits.NEW_TOKENS} is "
                   "expected")
    if not _is_real(temperature) or not _is_finite(temperature) or temperature < 0:
        out.append(f"{n['temperature']} is {short(temperature)}; a finite number >= 0 is expected (0 = greedy)")
    elif 0 < temperature < TINY_TEMPERATURE:   # float32 holds it as 0: the logits would be divided by zero
        out.append(f"{n['temperature']} is {short(temperature)}; a temperature above 0 must be at least "
                   f"{TINY_TEMPERATURE:.3g} (float32's smallest normal number, what sampling divides in; "
                   "0 = greedy)")
    elif temperature > HUGE_TEMPERATURE:   # float32 holds it as inf: every logit / T is 0, top_k keeps them all
        out.append(f"{n['temperature']} is {short(temperature)}; a temperature must be at most "
                   f"{HUGE_TEMPERATURE:.4g} (float32's largest number, what sampling divides in)")
    if not _is_real(top_p) or not 0 < top_p <= 1:
        out.append(f"{n['top_p']} is {short(top_p)}; a number in (0, 1] is expected")
    if not _is_int(top_k) or not 0 <= top_k <= vocab:
        out.append(f"{n['top_k']} is {short(top_k)}; an integer in 0..{vocab} is expected (0 = no top-k filter)")
    if seed is not None and (not _is_int(seed) or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]):
        out.append(f"{n['seed']} is {short(seed)}; None or an integer in -2**63 .. 2**64-1 is expected")
    stop = stop_ids(stop)   # as generate() reads it (idempotent): a 1-D integer tensor or array as a list
    if stop is not None:
        if isinstance(stop, (str, bytes)) or not isinstance(stop, Iterable) or _array_like(stop):
            # an array-like here is one stop_ids left alone: 0-D, 2-D or not integers
            shape = f" (a {stop.ndim}-D array of {stop.dtype})" if _array_like(stop) else ""
            out.append(f"{n['stop']} is {short(stop)}{shape}; a list of token ids (or a 1-D integer tensor or "
                       "array) is expected")
        elif hasattr(stop, "__len__") and len(stop) > vocab:   # more stop ids than tokens: not a stop list
            out.append(f"{n['stop']} holds {len(stop)} ids; the vocabulary has {vocab} tokens")
        elif bad := [t for t in stop if not _is_int(t) or t < 0]:
            out.append(f"{n['stop']} holds {short(bad[:MOST])}; stop token ids are integers >= 0")
        elif bad := [t for t in stop if t >= vocab]:   # an id from another tokenizer: it could never stop anything
            out.append(f"{n['stop']} holds ids outside the model's vocabulary 0..{vocab - 1}: {short(bad[:MOST])}")
    return out


def _rendered(problems: list[Problem], names: Mapping[str, str] | None) -> list[str]:
    """Problems of the overrides as text, each field under the name its caller knows it by (e.g. ``--topk``)."""
    out = []
    for p in problems:
        field = p.path.lstrip(".")
        out.append(replace(p, path=(names or {}).get(field, field)).render().strip())
    return out


def overridden(spec_decoding: Decoding, overrides: dict[str, Any], problems: list[str], *,
               draft_vocab: int, names: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The spec's decoding section with the per-call overrides (None leaves a field as the spec has it), checked
    like a spec: strict types and bounds, modes, topk within the draft's vocabulary, then the cross-field rules.
    Numpy integers count as ints (as they do for max_new_tokens and top_k). For a chain (topk 1) draft_tokens does
    not apply: it becomes steps + 1 and is never refused by a cross-field rule; so for mode v1 and for auto with a
    page_size past 1, which run a chain whatever topk says. ``names`` renames fields in the
    problems (the command line's option names). Returns the fields, or None with every reason appended to
    ``problems``."""
    given = {k: int(v) if _is_int(v) else v for k, v in overrides.items() if v is not None}
    dec = spec_decoding
    if given:
        try:
            dec = validate_strict(Decoding, {**spec_decoding.model_dump(mode="json"), **given})
        except ValidationError as e:
            problems += _rendered(problems_from(e, "", Decoding), names)
            return None
    if dec.topk > draft_vocab:
        problems += _rendered([Problem("topk", f"{dec.topk} candidates per node, but the draft's vocabulary has "
                                               f"{draft_vocab} tokens")], names)
        return None
    fields = dec.model_dump()
    if is_chain(fields["topk"], fields["mode"], fields["page_size"]):
        fields["draft_tokens"] = fields["steps"] + 1   # a chain (choose_mode's v1): draft_tokens does not apply
    cross = _rendered(decoding_problems(fields, path=""), names)
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


def vocab_sizes(model: Any) -> tuple[int, int, int | None]:
    """(target vocabulary, draft vocabulary, target context or None) of a SpeculativeModel."""
    vocab = int(model.target.model.embed_tokens.num_embeddings)
    d2t = getattr(model.draft, "d2t", None)
    draft_vocab = int(d2t.shape[0]) if d2t is not None else vocab
    dims = getattr(model.target, "dims", None)
    context = getattr(getattr(dims, "config", None), "max_position_embeddings", None)
    return vocab, draft_vocab, (int(context) if _is_int(context) and context > 0 else None)


def check_call(model: Any, prompt: Any, *, max_new_tokens: Any = 64, temperature: Any = 0.0, top_p: Any = 1.0,
               top_k: Any = 0, seed: Any = None, stop: Any = None, topk: Any = None, steps: Any = None,
               draft_tokens: Any = None, mode: Any = None, what: str = "generate()",
               names: Mapping[str, str] | None = None) -> tuple[list[list[int]], bool]:
    """Encode the prompts and check every argument; ArgumentError lists all problems, each argument under its
    name in ``names`` where it has one (the command line's options). Returns (prompts, single)."""
    vocab, draft_vocab, context = vocab_sizes(model)
    problems: list[str] = []
    prompts, single = encode_prompts(prompt, tokenizer=model.tokenizer, vocab=vocab, context=context,
                                     problems=problems, names=names)
    problems += settings_problems(max_new_tokens, temperature, top_p, top_k, seed, stop, vocab=vocab, names=names)
    overridden(model.spec.decoding, dict(topk=topk, steps=steps, draft_tokens=draft_tokens, mode=mode), problems,
               draft_vocab=draft_vocab, names=names)
    problems += context_problems(prompts, max_new_tokens, context, names)
    if prompts and _is_int(max_new_tokens) and max_new_tokens >= 1:   # else refused on their own
        # positions past those the target's rotary embedding computes as transformers does (a longrope target)
        problems += position_problems(model.target, max(map(len, prompts)), int(max_new_tokens),
                                      (names or {}).get("max_new_tokens", "max_new_tokens"))
    problems += placement_problems(model)
    if problems:
        raise ArgumentError(what, problems)
    return prompts, single


def placement_problems(model: Any) -> list[str]:
    """The target and the draft where ``assemble()`` put them (``model.device``, ``model.dtype``, the draft's
    ``draft_dtype``): one moved or cast afterwards (``model.target.to(torch.bfloat16)``) would meet KV pools of
    the assembled dtype inside its first forward. Read off each model's first floating-point parameter wider
    than a byte (FP8 weights keep their own dtype)."""
    out = []
    kind, _, index = str(model.device).partition(":")
    for name, module, dtype in (("target", model.target, model.dtype),
                                ("draft", model.draft, model.draft_dtype or model.dtype)):
        p = next((p for p in module.parameters() if p.is_floating_point() and p.element_size() > 1), None)
        if p is None:
            continue
        # cpu:N is the CPU (its tensors carry no index); cuda:N is that GPU
        moved = p.device.type != kind or (kind != "cpu" and index != "" and p.device.index != int(index))
        if moved or p.dtype != dtype:
            out.append(f"the {name}'s weights are {str(p.dtype).removeprefix('torch.')} on {p.device}, but the model "
                       f"was assembled for {str(dtype).removeprefix('torch.')} on {model.device} (its KV pools "
                       "follow that): call draftsmith.assemble(..., device=, dtype=) again instead of moving or "
                       "casting a model")
    return out
