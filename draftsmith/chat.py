"""Conversations as text, through the target tokenizer's own chat template.

A conversation is a list of messages ``{"role": str, "content": str}`` (the form transformers' pipelines and the
OpenAI API take). ``generate()`` takes one as a prompt and renders it with the generation prompt added, so the
target answers as the assistant; ``draftsmith train --chat`` renders its chat records the same way, so the draft
learns on the text it will meet. The template is the tokenizer's data (``chat_template`` in tokenizer_config.json
or chat_template.jinja; where it has none, the processor's chat_template.json, as vision-language checkpoints such as
Mistral-Small-3.1 keep it), run by transformers' ``apply_chat_template`` in its sandboxed Jinja environment: no code
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

from draftsmith.errors import CheckpointError, short, short_text

# ShareGPT's speaker names (EAGLE's training data: {"from": "human", "value": ...}) as chat roles
SHAREGPT_ROLES = {"human": "user", "gpt": "assistant", "system": "system", "user": "user", "assistant": "assistant"}
PROCESSOR_TEMPLATE = "chat_template.json"   # the processor's template file: {"chat_template": "<Jinja text>"}
SOURCES = "tokenizer_config.json's chat_template, chat_template.jinja or the processor's chat_template.json"


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


def texts(messages: Sequence[Mapping[str, Any]], parts: bool = False, wrap: bool = False) -> list[dict[str, Any]]:
    """The messages with text contents (:func:`content_text`), as a template gets them; their other keys (a tool
    call's ``tool_calls``, ``name``, ``tool_call_id``) are passed on as they are. ``parts``: the template loops over
    a content's parts (:func:`loops_over_parts`), so a list of parts is passed on as it is; ``wrap``: it never asks
    whether a content is a string (:func:`wants_parts`), so a text content is passed as one text part."""
    def given(i: int, content: Any) -> Any:
        if parts and isinstance(content, list):
            return content
        text = content_text(content, f"message {i}'s content")
        return [{"type": "text", "text": text}] if wrap else text
    return [{**m, "content": given(i, m.get("content"))} for i, m in enumerate(messages)]


def loops_over_parts(template: Any) -> bool:
    """Whether a chat template iterates over a message's content (``{% for part in message['content'] %}``: OpenAI-style
    parts, as Gemma-3's and Mistral-Small-3.1's do), read from its Jinja syntax tree as vLLM's content-format detection
    reads it, also through a variable a ``set`` gives the content to. Such a template gets a list of parts as
    transformers gives it (it joins them its own way); any other gets their text parts joined by newlines (vLLM's
    string format). A template that does not parse: False."""
    return _format(template)[0]


def wants_parts(template: Any) -> bool:
    """Whether a chat template loops over a message's content (:func:`loops_over_parts`) and never asks whether it
    is a string (``message['content'] is string``): a processor's template such as llava-hf's (``{% for c in
    message['content'] | selectattr('type', 'equalto', 'text') %}``) writes nothing of a string content, so a text
    content is given to it as one text part, as vLLM gives every content to a template that loops over parts.
    One that asks (Qwen2-VL's, Gemma-3's, Mistral-Small-3.1's) gets a string as it is, the form it writes as its
    authors test it."""
    return _format(template)[1]


def _format(template: Any) -> tuple[bool, bool]:
    """(:func:`loops_over_parts`, :func:`wants_parts`) of a template (named templates: 'default', which
    apply_chat_template renders); no template text: (False, False)."""
    if isinstance(template, Mapping):
        template = template.get("default")
    return _content_format(template) if isinstance(template, str) else (False, False)


@functools.lru_cache(maxsize=16)
def _content_format(template: str) -> tuple[bool, bool]:
    """:func:`_format` of a template's text, parsed once (a render per training record asks it); a template that
    does not parse: (False, False)."""
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
        return False, False

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
    loops = any(is_content(loop.iter) for loop in tree.find_all(nodes.For))
    asks = any(t.name == "string" and is_content(t.node) for t in tree.find_all(nodes.Test))
    return loops, loops and not asks


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
        return (f"the target's tokenizer{where} has no chat template ({SOURCES}), so a conversation cannot be "
                "rendered: pass text or token ids instead")
    return None


def has_chat_template(folder: Path) -> bool:
    """Whether a tokenizer folder holds a chat template (chat_template.jinja, or tokenizer_config.json's
    ``chat_template``: what AutoTokenizer reads; where neither, the processor's chat_template.json:
    :func:`processor_template`), read from its files without loading the tokenizer. A chat_template.json read and
    found malformed is a CheckpointError naming it."""
    if (folder / "chat_template.jinja").is_file():
        return True
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = None
    if isinstance(config, dict) and config.get("chat_template"):
        return True
    return processor_template(folder) is not None


def processor_template(folder: Path) -> str | None:
    """The template of a processor's chat_template.json (``{"chat_template": "<Jinja text>"}``), the file
    transformers' AutoProcessor reads its template from and AutoTokenizer does not (some vision-language checkpoints,
    Mistral-Small-3.1's, keep their template only there): read as the data it is, never run as code. None without
    the file or with an empty template; a file that is not such an object is a CheckpointError naming it."""
    path = Path(folder) / PROCESSOR_TEMPLATE
    if not (path.exists() or path.is_symlink()):
        return None
    if not path.is_file():   # a FIFO would block the read, a broken link has nothing to read
        raise CheckpointError(path, "is not a regular file (or is a broken link); the processor's chat template "
                                    "file must be one: fix or remove it")
    form = 'the processor\'s chat template file is {"chat_template": "<Jinja text>"}'
    fix = "fix or remove it (it is read because the tokenizer has no template of its own)"
    try:   # as transformers reads it: UTF-8 text, then JSON (a byte-order mark is refused, as it refuses it)
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise CheckpointError(path, f"cannot be read as JSON ({short_text(e, 200)}); {form}: {fix}") from None
    if not isinstance(data, dict) or "chat_template" not in data:
        found = f"keys {short(sorted(data), 120)}" if isinstance(data, dict) else short(data, 120)
        raise CheckpointError(path, f"holds {found}, no chat_template; {form}: {fix}")
    value = data["chat_template"]
    if value is not None and not isinstance(value, str):
        raise CheckpointError(path, f"chat_template is {short(value, 120)} ({type(value).__name__}), not the "
                                    f"template's Jinja text (a string); {form}: {fix}")
    return value or None


def render(tokenizer: Any, messages: Sequence[Mapping[str, str]], *, answer: bool) -> str:
    """The conversation as the template writes it; ``answer``: followed by the assistant's turn opening (the
    generation prompt), as a prompt is. A template that refuses the conversation (roles out of order, a role it
    does not know, no messages) raises :class:`TemplateRefused` with its own message."""
    try:
        template = getattr(tokenizer, "chat_template", None)
        given = texts(messages, loops_over_parts(template), wants_parts(template))
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
