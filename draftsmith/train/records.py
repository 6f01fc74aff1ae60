"""Training records: a JSONL file's lines and a .json file's records (an array of objects, or one) -> their text,
each problem named by file, line and column (`text`, `prompt` + `completion`, chat `messages`, ShareGPT
`conversations`; chats rendered by the target's chat template with `--chat`). Files and documents: train/data.py."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from draftsmith.chat import SHAREGPT_ROLES, TemplateRefused, content_text
from draftsmith.errors import short, short_list, short_text
from draftsmith.train.checks import TrainError

# A chat record's turns [{"role", "content"}] -> its text (train --chat: the target's chat template, see
# draftsmith.chat.render); None: the contents joined by newlines
Render = Callable[[list[dict[str, str]]], str]


def jsonl_text(record: dict, render: Render | None = None) -> str | None:
    """One JSONL (or .json) record's text: `text`, else `prompt` + `completion` (either may be missing; TRL's
    conversational form, both lists of messages, is a chat of the two), else chat `messages` contents joined, else
    ShareGPT `conversations` values joined (EAGLE's training data: ``{"from": "human", "value": "..."}`` turns;
    human / gpt read as the roles user / assistant; turns that are ``{"role", "content"}`` messages, as SpecForge's
    prepare_data writes them, are read as `messages`); a chat's turns are rendered by ``render`` instead where given
    (each then needs a role); None when it has none of these fields (or only null ones), which the reader counts. A
    content, value (or completion) is text as :func:`draftsmith.chat.content_text` reads it; `text` is a string or
    null, `prompt` a string, null or a list of messages, `messages` and `conversations` a list of objects; any
    other value is a ValueError saying which field holds what (dropping the record silently would train on less
    data than the file holds, unsaid)."""
    if record.get("text") is not None and not isinstance(record["text"], str):
        raise ValueError(f"text is {short(record['text'], 60)}: expected a string or null")
    if isinstance(record.get("text"), str):
        return record["text"]
    if isinstance(record.get("prompt"), list):   # TRL's conversational prompt / completion
        completion = record.get("completion")
        if completion is not None and not isinstance(completion, list):
            raise ValueError(f"completion is {short(completion, 60)}: a conversational prompt (a list of messages) "
                             "takes a list of messages or null")
        return turns_text(record["prompt"] + (completion or []), "prompt + completion", ("role", "content"),
                          "message", '{"role": "user", "content": "..."}', render)
    if record.get("prompt") is not None and not isinstance(record["prompt"], str):
        raise ValueError(f"prompt is {short(record['prompt'], 60)}: expected a string, null or a list of messages")
    if record.get("prompt") is not None or record.get("completion") is not None:
        return (record.get("prompt") or "") + content_text(record.get("completion"), "completion")
    if record.get("messages") is not None:
        return turns_text(record["messages"], "messages", ("role", "content"), "message",
                          '{"role": "user", "content": "..."}', render)
    if record.get("conversations") is not None:
        if message_turns(record["conversations"]):   # SpecForge's prepare_data: {"role", "content"} turns
            return turns_text(record["conversations"], "conversations", ("role", "content"), "message",
                              '{"role": "user", "content": "..."}', render)
        return turns_text(record["conversations"], "conversations", ("from", "value"), "turn",
                          '{"from": "human", "value": "..."}', render)
    return None


def message_turns(turns) -> bool:
    """Whether a `conversations` list holds chat messages ({"role", "content"}, as SpecForge's prepare_data writes
    its ShareGPT and UltraChat data) rather than ShareGPT turns ({"from", "value"}): no turn has a ShareGPT key and
    one has a message key. Anything else is read as ShareGPT turns, whose problems name the ShareGPT keys."""
    turns = [m for m in turns if isinstance(m, dict)] if isinstance(turns, list) else []
    return not any("from" in m or "value" in m for m in turns) and any("role" in m or "content" in m for m in turns)


def turns_text(turns, field: str, keys: tuple[str, str], noun: str, like: str, render: Render | None = None) -> str:
    """A chat's turns (`messages`, `conversations`) as text: their contents (``keys``: the role's key and the
    content's) joined by newlines, or rendered by ``render`` as [{"role", "content"}] turns."""
    role, key = keys
    if not isinstance(turns, list):
        raise ValueError(f"{field} is {short(turns, 60)}: expected a list of {noun}s")
    for i, m in enumerate(turns):
        if not isinstance(m, dict):
            raise ValueError(f"{field}[{i}] is {short(m, 60)}: expected a {noun} object like {like}")
        if key not in m and "tool_calls" not in m:   # a misnamed key is no empty turn (OpenAI: tool calls may omit it)
            raise ValueError(f"{field}[{i}].{key} is missing (its keys: {short_list(sorted(map(str, m)))}): "
                             f"expected a {noun} object like {like}, null for a {noun} without text")
    contents = [content_text(m.get(key), f"{field}[{i}].{key}") for i, m in enumerate(turns)]
    if render is None:
        return "\n".join(contents)
    for i, m in enumerate(turns):
        if not isinstance(m.get(role), str):
            found = "missing" if role not in m else f"{short(m[role], 40)}"
            raise ValueError(f"{field}[{i}].{role} is {found}: --chat renders each turn with its role, a string")
    # a list of parts goes to the template as it is: chat.render gives it to a template that loops over parts, as
    # generate() does, and the joined text to any other
    return render([{"role": SHAREGPT_ROLES.get(m[role], m[role]) if role == "from" else m[role],
                    "content": m[key] if isinstance(m.get(key), list) else c} for m, c in zip(turns, contents)])


SURROGATE = re.compile("[\ud800-\udfff]")   # JSON's \ud800 escapes decode to these, which no text encoding holds


def jsonl_record(f: Path, n: int, line: str) -> dict:
    """Line ``n`` of the JSONL file ``f`` as an object; a TrainError "FILE:N: ..." when it is not one."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise TrainError([("", f"{short_text(f, 300)}:{n}: not valid JSON ({e.msg} at column {e.colno})")]) from None
    except (ValueError, RecursionError) as e:   # nesting too deep, an integer too long
        raise TrainError([("", f"{short_text(f, 300)}:{n}: not usable JSON ({type(e).__name__})")]) from None
    if not isinstance(record, dict):
        raise TrainError([("", f"{short_text(f, 300)}:{n}: a JSON object is expected, found {short(record, 40)}")])
    return record


def jsonl_documents(f: Path, text: str, textless: list[str] | None = None, render: Render | None = None) -> list[str]:
    """The documents of the JSONL file ``f`` (read as ``text``): one per line with text; a line without any (no
    text field, or an empty one) is appended to ``textless`` as "FILE:N" when given. Lines end at "\n" only
    (U+2028 or U+0085 inside a string is text, as JSON allows); a line that is not a JSON object, a text field of
    another type, or text holding a lone surrogate is a TrainError naming the file and line."""
    docs = []
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        take(docs, textless, f"{f}:{n}", f"{short_text(f, 300)}:{n}", jsonl_record(f, n, line), render)
    return docs


class Refused(str):
    """The place ("FILE:LINE") of a chat record whose template refused it, with ``why``: skipped and counted apart
    from the records without text (real ShareGPT data holds conversations that open with the assistant, or roles
    a strict template does not know, which EAGLE's own data preparation drops too)."""
    why: str = ""


def take(docs: list[str], textless: list[str] | None, place: str, where: str, record,
         render: Render | None) -> None:
    """Append a record's text to ``docs``, or its ``place`` to ``textless``: a record without text, or (as a
    :class:`Refused`) a chat the template refused; any other problem is raised (:func:`record_text`)."""
    try:
        t = record_text(where, record, render)
    except TemplateRefused as e:
        t, place = None, Refused(place)
        place.why = str(e)
    if t:
        docs.append(t)
    elif textless is not None:
        textless.append(place)


def record_text(where: str, record, render: Render | None = None) -> str | None:
    """A record's text (:func:`jsonl_text`); a record that is not an object, a text field of another type, or text
    holding a lone surrogate is a TrainError "WHERE: ..."; a chat the template refuses raises TemplateRefused."""
    if not isinstance(record, dict):
        raise TrainError([("", f"{where}: a JSON object is expected, found {short(record, 40)}")])
    try:
        t = jsonl_text(record, render)
    except TemplateRefused:
        raise
    except ValueError as e:
        raise TrainError([("", f"{where}: {e}")]) from None
    if t and (bad := SURROGATE.search(t)):
        raise TrainError([("", f"{where}: the text holds a lone surrogate (U+{ord(bad.group()):04X} at character "
                               f"{bad.start()}), which is not a character: no tokenizer can encode it")])
    return t


JSON_SPACE = re.compile(r"[ \t\n\r]*")   # the whitespace JSON allows between values
DECODER = json.JSONDecoder()


def json_documents(f: Path, text: str, textless: list[str] | None = None, render: Render | None = None) -> list[str]:
    """The documents of the .json file ``f`` (read as ``text``): a JSON array of records, or one record object,
    each record read as a JSONL line is (:func:`record_text`: `text`, `prompt` + `completion`, `messages`, ShareGPT
    `conversations`), one document per record with text. A record without any is appended to ``textless`` as
    "FILE:LINE:COLUMN" where it starts (an array on one line holds many records per line). Blank text or ``[]``
    holds none. Text that is not JSON is a TrainError "FILE:LINE: not valid JSON (... at column C)", as a JSONL
    line's; content that is not records (a number, an array of non-objects) or a bad record, a TrainError naming
    the file, line and column of the value."""
    docs = []
    line, line_start, seen = 1, 0, 0   # counted up to ``seen``: a one-line array is not rescanned per record
    for start, record in json_records(f, text):
        if (nl := text.rfind("\n", seen, start)) >= 0:
            line, line_start = line + text.count("\n", seen, start), nl + 1
        seen = start
        where = f"{line}:{start - line_start + 1}"
        take(docs, textless, f"{f}:{where}", f"{short_text(f, 300)}:{where}", record, render)
    return docs


def json_records(f: Path, text: str):
    """(offset, value) of each element of the JSON array ``text`` (each decoded as it is reached, so a bad value is
    named where it starts), or of the one object it holds; a TrainError for text that is not JSON or other
    top-level content (see :func:`json_documents`)."""
    i = JSON_SPACE.match(text, 0).end()
    if i == len(text):
        return
    if text[i] != "[":
        value, end = json_value(f, text, i)
        json_end(f, text, end)
        if not isinstance(value, dict):
            raise TrainError([("", f"{short_text(f, 300)}:{place(text, i)}: a JSON array of records or one record "
                                   f"object is expected, found {short(value, 40)}")])
        yield i, value
        return
    i = JSON_SPACE.match(text, i + 1).end()
    if not text.startswith("]", i):
        while True:
            value, end = json_value(f, text, i)
            yield i, value
            i = JSON_SPACE.match(text, end).end()
            if text.startswith(",", i):
                i = JSON_SPACE.match(text, i + 1).end()
            elif text.startswith("]", i):
                break
            else:
                raise not_json(f, json.JSONDecodeError("Expecting ',' delimiter", text, i))
    json_end(f, text, i + 1)


def json_value(f: Path, text: str, i: int):
    """The JSON value at offset ``i`` of ``text`` and the offset past it, or a TrainError naming the file and line."""
    try:
        return DECODER.raw_decode(text, i)
    except json.JSONDecodeError as e:
        raise not_json(f, e) from None
    except (ValueError, RecursionError) as e:   # nesting too deep, an integer too long
        raise TrainError([("", f"{short_text(f, 300)}:{place(text, i)}: not usable JSON "
                               f"({type(e).__name__})")]) from None


def json_end(f: Path, text: str, end: int) -> None:
    """Nothing but whitespace past offset ``end``, else a TrainError (as json.loads: "Extra data")."""
    if (j := JSON_SPACE.match(text, end).end()) < len(text):
        raise not_json(f, json.JSONDecodeError("Extra data", text, j))


def not_json(f: Path, e: json.JSONDecodeError) -> TrainError:
    return TrainError([("", f"{short_text(f, 300)}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})")])


def place(text: str, i: int) -> str:
    """"LINE:COLUMN" of offset ``i`` (both from 1, lines ending at "\n", as json's errors count them)."""
    return f"{text.count(chr(10), 0, i) + 1}:{i - text.rfind(chr(10), 0, i)}"
