"""The prompts of a ``generate()`` / ``generate_baseline()`` call as token ids, checked before anything runs.

Prompts: a str (needs the target's tokenizer), a sequence of token ids, a 1-D integer torch tensor or numpy array, a
conversation (a list of ``{"role", "content"}`` messages, rendered by the target tokenizer's chat template with the
generation prompt, see :mod:`draftsmith.chat`), or a list of those (a batch). Everything else is refused: bytes,
floats, booleans, 2-D tensors, float tensors, an empty list. Every id must be inside the target's vocabulary, also
the ids a tokenizer produced (its vocabulary may be larger than the model's). A prompt longer than the target's
context is refused (a conversation by the tokens its template renders, not by its messages), and so is a call whose
prompt + max_new_tokens runs past it (the KV pools are sized for that length up front).
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from draftsmith import limits
from draftsmith.chat import (conversation_ids, is_conversation, message_problems, nested_strings, template_problem,
                             texts, written_size)
from draftsmith.values import array_like, integer_vector, is_int
from draftsmith.errors import fit, short

MOST = 8   # problems listed per prompt

FORMS = ("a str, a list of token ids, a 1-D integer tensor or numpy array, a conversation (a list of "
         "{'role', 'content'} messages), or a list of those (a batch)")


def _array_ids(p: Any, where: str, problems: list[str]) -> list[int] | None:
    """A 1-D integer tensor or numpy array as a list of ids; anything array-like and else, a problem."""
    kind = "tensor" if type(p).__module__.startswith("torch") else "array"
    a = "an" if kind == "array" else "a"
    dtype = str(p.dtype).removeprefix("torch.")
    if p.ndim != 1:
        problems.append(f"{where}: a {p.ndim}-D {kind} of shape {list(p.shape)}; a prompt is 1-D (pass a list of "
                        "1-D prompts for a batch)")
        return None
    if not integer_vector(p):
        problems.append(f"{where}: {a} {kind} of {dtype}; token ids are integers")
        return None
    if getattr(p, "is_meta", False):   # torch: "Cannot copy out of meta tensor"
        problems.append(f"{where}: a tensor on the meta device, which holds no values; pass one on the CPU or a GPU")
        return None
    return [int(t) for t in p.tolist()]


def _ids(p: Any, where: str, tokenizer: Any, problems: list[str], context: int | None = None,
         new: tuple[str, Any] = ("max_new_tokens", None)) -> list[int] | None:
    """One prompt as ids, or None with the reasons appended to ``problems``. A sequence or array longer than the
    context is refused by its length alone, before each token is looked at (past the first, which tells it from a
    conversation); a conversation's length is its messages, not its tokens: it is checked once rendered
    (:func:`encode_prompts`). ``new``: (its name, max_new_tokens), for the room a refusal says is left."""
    if is_conversation(p):   # reads an id list's first item only: it is not a message
        return _conversation_ids(p, where, tokenizer, problems)
    if isinstance(p, (bytes, bytearray, memoryview)):   # before the length check: their length is bytes, not tokens
        problems.append(f"{where}: bytes; a prompt is text (decode the bytes first) or token ids")
        return None
    # a sequence or array only: a set or mapping is no prompt at any length (said below, not as tokens)
    if context is not None and not isinstance(p, str) and (isinstance(p, Sequence) or array_like(p)) and \
            _longer(p, context):
        problems.append(_past_context(where, len(p), context, new=new))
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
    if array_like(p):
        return _array_ids(p, where, problems)
    if not isinstance(p, Sequence):
        problems.append(f"{where}: {short(p)} ({type(p).__name__}) is not a prompt; a prompt is {FORMS}")
        return None
    bad = [(i, t) for i, t in enumerate(p) if not is_int(t)]
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


def _past_context(where: str, tokens: int, context: int, messages: int | None = None,
                  new: tuple[str, Any] = ("max_new_tokens", None)) -> str:
    # a prompt longer than the context: said alike whether its length was seen before its tokens or after encoding;
    # a conversation (``messages``) is said with what its template rendered it to; then by how much, and the length
    # that leaves room for ``new`` (name, max_new_tokens; the last new token is never fed, as context_problems says)
    what = f"{tokens} tokens" if messages is None else \
        f"a conversation of {messages} message{'s' * (messages != 1)} rendered to {tokens} tokens"
    over = f"{where}: {what}; the target's context (max_position_embeddings) is {context}: {tokens - context} over"
    name, n = new
    if not (is_int(n) and n >= 1):   # no usable count (refused on its own)
        return f"{over}; shorten it to at most {context} tokens (one new token then fits)"
    if (room := context - int(n) + 1) >= 1:
        return (f"{over}; shorten it to at most {room} tokens, which leaves room for {name} {int(n)} (the last new "
                "token is never fed)")
    return (f"{over}; shorten it, and lower {name} {int(n)}: a prompt of P tokens leaves room for {context} - P + 1 "
            "new ones")


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
                   names: Mapping[str, str] | None = None, max_new_tokens: Any = None) -> tuple[list[list[int]], bool]:
    """Every prompt as token ids (problems appended for each one that is not usable); ``names`` renames the
    argument in them (the command line's option, e.g. ``--token-ids``); a prompt past the context is told the
    length that leaves room for ``max_new_tokens`` where it is given."""
    name = (names or {}).get("prompt", "prompt")
    new = ((names or {}).get("max_new_tokens", "max_new_tokens"), max_new_tokens)
    if isinstance(prompt, (list, tuple)) and len(prompt) == 0:
        problems.append(f"{name}: an empty list is neither a prompt (no token ids) nor a batch (no prompts)")
        return [], True
    items, single = split_prompts(prompt)
    if not single and all(array_like(p) and p.ndim == 0 for p in items):   # list(ids_tensor): one problem, not one
        kind = "tensor" if type(items[0]).__module__.startswith("torch") else "array"   # a prompt per id
        problems.append(f"{name}: a list of {len(items)} 0-D {kind}s (list() of a 1-D {kind} gives one per id); "
                        f"pass the 1-D {kind} itself, or its .tolist()")
        return [], single
    if len(items) > limits.BATCH:   # each prompt is a row of the KV pools, allocated up front
        problems.append(f"{name}: a batch of {len(items)} prompts; at most {limits.BATCH} in one call")
        return [], single
    out = []
    for i, p in enumerate(items):
        where = name if single else f"{name} {i}"
        ids = _ids(p, where, tokenizer, problems, context, new)
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
            problems.append(_past_context(where, len(ids), context, len(p) if is_conversation(p) else None, new))
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
    if context is None or not prompts or not is_int(max_new_tokens) or max_new_tokens < 1:
        return []  # no context declared, no usable prompt, or no count of tokens (refused on its own)
    longest = max(map(len, prompts))
    # int(): a numpy uint8 count wraps; a prompt longer than the context is refused on its own
    if longest + int(max_new_tokens) - 1 <= context or longest > context:
        return []
    name = (names or {}).get("max_new_tokens", "max_new_tokens")
    return [f"{name} is {short(max_new_tokens)}: with a {longest}-token prompt it runs past the target's "
            f"context of {context} tokens (max_position_embeddings); {fit(context - longest + 1)} "
            "(the last one is never fed)"]
