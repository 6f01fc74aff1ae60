"""Conversations as text, through the target tokenizer's own chat template.

A conversation is a list of messages ``{"role": str, "content": str}`` (the form transformers' pipelines and the
OpenAI API take). ``generate()`` takes one as a prompt and renders it with the generation prompt added, so the
target answers as the assistant; ``draftsmith train --chat`` renders its chat records the same way, so the draft
learns on the text it will meet. The template is the tokenizer's data (``chat_template`` in tokenizer_config.json
or chat_template.jinja), run by transformers' ``apply_chat_template`` in its sandboxed Jinja environment: no code
from the checkpoint is imported. What messages hold (a tool call's nested lists and mappings) is walked without
recursion, each container once: :func:`written_size` counts the values a template would write, :func:`nested_strings`
yields the strings.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from draftsmith.errors import short, short_text

# ShareGPT's speaker names (EAGLE's training data: {"from": "human", "value": ...}) as chat roles
SHAREGPT_ROLES = {"human": "user", "gpt": "assistant", "system": "system", "user": "user", "assistant": "assistant"}


class TemplateRefused(ValueError):
    """The chat template refused a conversation (roles out of order, a role it does not know, no messages)."""


def content_text(value: Any, field: str) -> str:
    """A message's content as text: a string, null (empty: an assistant turn that only calls a tool) or a list of
    OpenAI-style parts whose text parts are joined by newlines (other parts, such as images, are skipped); any other
    value is a ValueError naming ``field``."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, list) and all(isinstance(p, Mapping) for p in value):
        texts = [p.get("text") for p in value if p.get("type", "text") == "text"]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(texts)
    raise ValueError(f"{field} is {short(value, 60)}: expected a string, null or a list of parts like "
                     '{"type": "text", "text": "..."}')


def is_conversation(prompt: Any) -> bool:
    """A non-empty list or tuple of mappings: one conversation (not a batch of prompts)."""
    return isinstance(prompt, (list, tuple)) and bool(prompt) and all(isinstance(m, Mapping) for m in prompt)


def message_problems(messages: Sequence[Any], where: str) -> list[str]:
    """Why ``messages`` is not a conversation a chat template can render: each must be a mapping whose ``role`` is a
    string and whose ``content`` is text as :func:`content_text` reads it (a template reads both of every message)."""
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            out.append(f"{where}: message {i} is {short(m)}; a message is {{'role': ..., 'content': ...}}")
            continue
        if not isinstance(m.get("role"), str):
            found = "missing" if "role" not in m else f"{short(m['role'])} ({type(m['role']).__name__})"
            out.append(f"{where}: message {i}'s role is {found}; it must be a string")
        if "content" not in m:
            out.append(f"{where}: message {i}'s content is missing; it must be text")
            continue
        try:
            content_text(m["content"], f"message {i}'s content")
        except ValueError as e:
            out.append(f"{where}: {e}")
    return out


def texts(messages: Sequence[Mapping[str, Any]], parts: bool = False) -> list[dict[str, Any]]:
    """The messages with text contents (:func:`content_text`), as a template gets them; their other keys (a tool
    call's ``tool_calls``, ``name``, ``tool_call_id``) are passed on as they are. ``parts``: the template loops over
    a content's parts (:func:`loops_over_parts`), so a list of parts is passed on as it is."""
    return [{**m, "content": m["content"] if parts and isinstance(m.get("content"), list) else
             content_text(m.get("content"), f"message {i}'s content")} for i, m in enumerate(messages)]


def loops_over_parts(template: Any) -> bool:
    """Whether a chat template iterates over a message's content (``{% for part in message['content'] %}``: OpenAI-style
    parts, as Gemma-3's and Mistral-Small-3.1's do), read from its Jinja syntax tree as vLLM's content-format detection
    reads it, also through a variable a ``set`` gives the content to. Such a template gets a list of parts as
    transformers gives it (it joins them its own way); any other gets their text parts joined by newlines (vLLM's
    string format). A template that does not parse: False."""
    if isinstance(template, Mapping):   # named templates: apply_chat_template renders 'default'
        template = template.get("default")
    return isinstance(template, str) and _loops_over_parts(template)


@functools.lru_cache(maxsize=16)
def _loops_over_parts(template: str) -> bool:
    """:func:`loops_over_parts` of a template's text, parsed once (a render per training record asks it)."""
    import jinja2
    from jinja2 import ext, nodes

    class Generation(ext.Extension):   # transformers' {% generation %} tag (assistant-mask tracking), parsed away
        tags = {"generation"}

        def parse(self, parser):
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    try:
        tree = jinja2.Environment(extensions=[ext.loopcontrols, Generation]).parse(template)
    except jinja2.TemplateError:
        return False

    names: set[str] = set()   # variables a `set` gives the content (or a name that holds it) to

    def is_content(node: nodes.Node) -> bool:
        while isinstance(node, (nodes.Filter, nodes.Test)) and node.node is not None:   # content | selectattr(...)
            node = node.node
        return (isinstance(node, nodes.Getattr) and node.attr == "content") or (
            isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and node.arg.value == "content") or (
            isinstance(node, nodes.Name) and node.name in names)
    sets = [s for s in tree.find_all(nodes.Assign) if isinstance(s.target, nodes.Name)]
    while new := {s.target.name for s in sets if s.target.name not in names and is_content(s.node)}:
        names |= new   # {% set c = m['content'] %}{% set d = c %}: both hold it
    return any(is_content(loop.iter) for loop in tree.find_all(nodes.For))


def written_size(value: Any, most: int) -> int | None:
    """How many values ``value`` holds as a template writes it out (each container and leaf once per place it is
    held, so a part held twice counts twice), counted once per container (memoised, without recursion) and capped
    past ``most``; None for a container that holds itself, which no template can write."""
    nested = (Mapping, list, tuple)
    if not isinstance(value, nested):
        return 1   # a leaf: one value (a string is one, not one per character)
    size: dict[int, int] = {}
    path: set[int] = set()
    stack = [(value, False)]
    while stack:
        v, closing = stack.pop()
        parts = [*v.keys(), *v.values()] if isinstance(v, Mapping) else v
        if closing:
            path.discard(id(v))
            size[id(v)] = min(most + 1, 1 + sum(size[id(c)] if isinstance(c, nested) else 1 for c in parts))
        elif id(v) in path:
            return None
        elif id(v) not in size:
            path.add(id(v))
            stack += [(v, True), *((c, False) for c in parts if isinstance(c, nested))]
    return size[id(value)]


def nested_strings(value: Any, seen: set[int] | None = None) -> Iterator[str]:
    """Every string held in nested mappings (keys too), lists and tuples, depth-first without recursion; a container
    is walked once however often it is held (``seen``: the ids of those walked, shared across calls)."""
    stack, seen = [value], set() if seen is None else seen
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, (Mapping, list, tuple)) and id(v) not in seen:
            seen.add(id(v))
            stack += [*v.keys(), *v.values()] if isinstance(v, Mapping) else v


def template_problem(tokenizer: Any, folder: Any = None, template: bool | None = None) -> str | None:
    """Why ``tokenizer`` cannot render a conversation (none, or no chat template), else None; ``template``: whether
    it has one where that is known from its files (:func:`has_chat_template`), before it is loaded."""
    where = f" in {short_text(folder, 300)}" if folder is not None else ""
    if template is None:
        if tokenizer is None:
            return f"a conversation needs the target's tokenizer and its chat template; there is no tokenizer{where}"
        template = bool(getattr(tokenizer, "chat_template", None))
    if not template:
        return (f"the target's tokenizer{where} has no chat template (tokenizer_config.json's chat_template or "
                "chat_template.jinja), so a conversation cannot be rendered: pass text or token ids instead")
    return None


def has_chat_template(folder: Path) -> bool:
    """Whether a tokenizer folder holds a chat template (chat_template.jinja, or tokenizer_config.json's
    ``chat_template``: what AutoTokenizer reads), read from its files without loading the tokenizer."""
    if (folder / "chat_template.jinja").is_file():
        return True
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))


def render(tokenizer: Any, messages: Sequence[Mapping[str, str]], *, answer: bool) -> str:
    """The conversation as the template writes it; ``answer``: followed by the assistant's turn opening (the
    generation prompt), as a prompt is. A template that refuses the conversation (roles out of order, a role it
    does not know, no messages) raises :class:`TemplateRefused` with its own message."""
    try:
        given = texts(messages, loops_over_parts(getattr(tokenizer, "chat_template", None)))
        text = tokenizer.apply_chat_template(given, tokenize=False, add_generation_prompt=answer)
    except Exception as e:   # noqa: BLE001 (Jinja's errors, and a template's raise_exception, are of many kinds)
        raise TemplateRefused(f"the chat template refused it: {type(e).__name__}: {short_text(e, 200)}") from None
    if not isinstance(text, str):
        raise TemplateRefused(f"the chat template gave {short(text)}, not text")
    return text


def conversation_ids(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> list[int]:
    """A conversation prompt's token ids: rendered with the generation prompt, then encoded without adding special
    tokens (the template writes its own, a BOS included where the model wants one)."""
    return [int(t) for t in tokenizer.encode(render(tokenizer, messages, answer=True), add_special_tokens=False)]
