"""Training text: local text, JSONL and .json record files -> documents -> token windows, and the Python standard
library as a corpus (the demo pair's data: everything but the test folders, which hold the held-out text)."""
from __future__ import annotations

import json
import re
import sysconfig
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import torch

from draftsmith.chat import SHAREGPT_ROLES, TemplateRefused, content_text
from draftsmith.errors import NotFound, short, short_text
from draftsmith.train.checks import TrainError

TEXT_SUFFIXES = {".txt", ".py", ".md", ".rst", ".json", ".yaml", ".yml", ".toml", ".c", ".h", ".js", ".ts", ".rs",
                 ".go", ".java", ".cpp", ".sh", ".html", ".css", ""}
RECORD_SUFFIXES = (".jsonl", ".json")   # read record by record (JSONL lines; a .json array of records or one record)
TEST_DIRS = ("test", "tests", "idle_test")  # path parts that mark the stdlib's test code

# A chat record's turns [{"role", "content"}] -> its text (train --chat: the target's chat template, see
# draftsmith.chat.render); None: the contents joined by newlines
Render = Callable[[list[dict[str, str]]], str]


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(held_out: bool = False) -> list[Path]:
    """The stdlib's *.py files (site-packages excluded), sorted: outside any test folder, or (held_out) inside."""
    root = stdlib_dir()
    files = []
    for f in sorted(root.rglob("*.py")):
        parts = f.relative_to(root).parts
        if "site-packages" in parts:
            continue
        if any(p in TEST_DIRS for p in parts[:-1]) == held_out:
            files.append(f)
    return files


def expand(paths: Iterable[str | Path], skip: Iterable[str | Path] = ()) -> list[Path]:
    """Files named directly, and the text / JSONL files under folders (sorted, recursively), but for hidden ones
    (a name under the folder starting with '.': a checkout's .git, a .venv), __pycache__ and those under the
    ``skip`` folders (a run's own --out and features folder inside its --data: its config.json is no data)."""
    found: list[Path] = []
    skipped = [Path(s).resolve() for s in skip]
    for p in map(Path, paths):
        if p.is_dir():
            found += [f for f in sorted(p.rglob("*")) if f.is_file()
                      and (f.suffix in TEXT_SUFFIXES or f.suffix == ".jsonl") and not _hidden(f.relative_to(p))
                      and not any(f.resolve().is_relative_to(s) for s in skipped)]
        elif p.is_file():
            found.append(p)
        else:
            raise NotFound(f"no such file or folder: {short_text(p, 300)}")
    return found


def _hidden(relative: Path) -> bool:
    return "__pycache__" in relative.parts or any(part.startswith(".") for part in relative.parts)


def jsonl_text(record: dict, render: Render | None = None) -> str | None:
    """One JSONL (or .json) record's text: `text`, else `prompt` + `completion` (either may be missing; TRL's
    conversational form, both lists of messages, is a chat of the two), else chat `messages` contents joined, else
    ShareGPT `conversations` values joined (EAGLE's training data: ``{"from": "human", "value": "..."}`` turns;
    human / gpt read as the roles user / assistant); a chat's turns are rendered by ``render`` instead where given
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
        return turns_text(record["conversations"], "conversations", ("from", "value"), "turn",
                          '{"from": "human", "value": "..."}', render)
    return None


def turns_text(turns, field: str, keys: tuple[str, str], noun: str, like: str, render: Render | None = None) -> str:
    """A chat's turns (`messages`, `conversations`) as text: their contents (``keys``: the role's key and the
    content's) joined by newlines, or rendered by ``render`` as [{"role", "content"}] turns."""
    role, key = keys
    if not isinstance(turns, list):
        raise ValueError(f"{field} is {short(turns, 60)}: expected a list of {noun}s")
    for i, m in enumerate(turns):
        if not isinstance(m, dict):
            raise ValueError(f"{field}[{i}] is {short(m, 60)}: expected a {noun} object like {like}")
    contents = [content_text(m.get(key), f"{field}[{i}].{key}") for i, m in enumerate(turns)]
    if render is None:
        return "\n".join(contents)
    for i, m in enumerate(turns):
        if not isinstance(m.get(role), str):
            found = "missing" if role not in m else f"{short(m[role], 40)}"
            raise ValueError(f"{field}[{i}].{role} is {found}: --chat renders each turn with its role, a string")
    return render([{"role": SHAREGPT_ROLES.get(m[role], m[role]) if role == "from" else m[role], "content": c}
                   for m, c in zip(turns, contents)])


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


def file_documents(f: Path, textless: list[str] | None = None, render: Render | None = None) -> list[str]:
    """The documents of one file: a JSONL file's lines (:func:`jsonl_documents`) and a .json file's records
    (:func:`json_documents`) with text (chats rendered by ``render`` where given), each record without any appended
    to ``textless``; any other file is one
    document (none when blank). A JSONL or .json file that is not UTF-8 is a TrainError naming it; another file's
    UnicodeDecodeError, and an OSError, is raised."""
    try:
        text = f.read_text(encoding="utf-8-sig")  # a leading BOM (Windows editors) is not text
    except UnicodeDecodeError as e:
        if f.suffix in RECORD_SUFFIXES:
            raise TrainError([("", f"{short_text(f, 300)}: not UTF-8 text (byte {e.object[e.start]:#04x} at "
                                   f"offset {e.start}), so not {'JSONL' if f.suffix == '.jsonl' else 'JSON'}")]
                             ) from None
        raise
    if f.suffix == ".jsonl":
        return jsonl_documents(f, text, textless, render)
    if f.suffix == ".json":
        return json_documents(f, text, textless, render)
    return [text] if text.strip() else []


def read_documents(files: Sequence[Path], skipped: list[Path] | None = None,
                   textless: list[str] | None = None, render: Render | None = None) -> list[str]:
    """Each text file is one document; each JSONL line and .json record with text is one (see
    :func:`file_documents`, which appends the records without text to ``textless``). A JSONL or .json file that is
    not UTF-8 is a TrainError naming it; other unreadable or undecodable files are skipped (and appended to
    ``skipped`` when given, for the caller to count). A file's reading stops at its first problem, and the next
    file is read: one TrainError names the first problem of each file that has one."""
    docs, found = [], []
    for f in files:
        try:
            docs += file_documents(f, textless, render)
        except (UnicodeDecodeError, OSError):
            if skipped is not None:
                skipped.append(f)
        except TrainError as e:
            found += e.problems
    if found:
        raise TrainError(found)
    return docs


def record_problems(files: Sequence[Path], render: Render | None = None) -> list[tuple[str, str]]:
    """The first problem of each JSONL / JSON file among ``files`` as training reads it (:func:`read_documents`):
    held-out files, read when acceptance is measured after training, are checked before it."""
    try:
        read_documents([f for f in files if f.suffix in RECORD_SUFFIXES], render=render)
    except TrainError as e:
        return e.problems
    return []


ENCODE_CHARS = 1 << 20   # documents tokenized together: the tokenizer's encodings of a call are held at once


def encode(docs: Sequence[str], tokenizer, sep: int | None) -> torch.Tensor:
    """[N] int64: the documents' tokens concatenated, each followed by ``sep`` (e.g. eos) when given. Tokenized a
    batch of documents (about ``ENCODE_CHARS`` characters) at a time, each kept as a tensor, so memory holds one
    batch's encodings and 8 bytes a token, not the whole corpus's encodings and a Python list (124-334 bytes a
    token); the ids are the same as one call's. A document longer than a batch is tokenized in pieces
    (:func:`pieces`): a 16 MB text file in one call took 2.5 GiB (~520 bytes a token), so a corpus shipped as one
    file (wikitext-103's 540 MB) would not fit in memory."""
    parts: list[torch.Tensor] = []
    tail = [] if sep is None else [sep]

    def flush(batch: list[tuple[str, bool]]) -> None:
        encoded = tokenizer([text for text, _ in batch], add_special_tokens=False)["input_ids"]
        parts.extend(torch.tensor(enc + tail if last else enc, dtype=torch.long)
                     for enc, (_, last) in zip(encoded, batch))

    batch, size = [], 0
    for doc in docs:
        for text, last in pieces(doc, ENCODE_CHARS):
            batch.append((text, last))
            size += len(text)
            if size >= ENCODE_CHARS:
                flush(batch)
                batch, size = [], 0
    if batch:
        flush(batch)
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


def pieces(doc: str, size: int) -> Iterator[tuple[str, bool]]:
    """``doc`` as consecutive (piece, is the last) of about ``size`` characters or more: each cut after a newline
    between two characters that are not whitespace, or before a line opening with one space then a word, where the
    byte-level BPE tokenizers' pre-tokenizers (GPT-2, Llama-3, SmolLM2, Qwen) end a pre-token whether or not the
    text goes on (after "\\n\\n" or a newline and spaces they would not: the run of whitespace is read otherwise at
    a text's end), so the pieces' ids are the whole document's; a tokenizer that marks the first word of each call
    as a word start (SentencePiece's: Llama-2, Mistral; a byte-level one with add_prefix_space) may read a piece's
    first word so: one token in a million characters. A document with no such newline past ``size`` is one
    piece."""
    start = 0
    while len(doc) - start > size:
        cut = next((m.end() for m in _CUT.finditer(doc, start + size)), None)
        if cut is None:
            break
        yield doc[start:cut], False
        start = cut
    yield doc[start:], True


# a line break between two characters that are not whitespace, or before a line that opens with one space and then
# one (wikitext's every line: " = Title = ", " The ..."; the space starts the next word's pre-token either way)
_CUT = re.compile(r"(?<=\S)\n(?=\S)|\n(?= \S)")


def windows(ids: torch.Tensor, seq: int, seed: int = 0) -> torch.Tensor:
    """[N // seq, seq]: non-overlapping windows in a seeded random order (a partial pass sees all the data)."""
    n = len(ids) // seq
    w = ids[: n * seq].view(n, seq)
    return w[torch.randperm(n, generator=torch.Generator().manual_seed(seed))]


def held_out_prompts(files: Sequence[Path], tokenizer, n: int, prompt_tokens: int, seed: int = 0,
                     render: Render | None = None) -> list[list[int]]:
    """``n`` prompts of ``prompt_tokens`` tokens from the files in a seeded order. A text file is one candidate,
    starting at a line boundary a third of the way in (past the imports and the header); a JSONL or .json file is
    one candidate per record with text, read as training reads it (:func:`file_documents`: its text, not its JSON),
    from the record's start, its records in a seeded order. A candidate needs ``prompt_tokens`` + 64 tokens."""
    g = torch.Generator().manual_seed(seed)
    prompts: list[list[int]] = []
    for i in torch.randperm(len(files), generator=g).tolist():
        if len(prompts) >= n:
            break
        if files[i].suffix in RECORD_SUFFIXES:
            docs = file_documents(files[i], render=render)
            texts = [docs[j] for j in torch.randperm(len(docs), generator=g).tolist()]
        else:
            lines = files[i].read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
            texts = ["".join(lines[len(lines) // 3:])]
        for text in texts:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            if len(ids) >= prompt_tokens + 64:
                prompts.append(ids[:prompt_tokens])
            if len(prompts) >= n:
                break
    return prompts


def line_offsets(text: str, k: int) -> list[str]:
    """``k`` suffixes of ``text``, starting at the line starts j / k of the way through its lines (j < k, distinct;
    j = 0 is the whole text)."""
    lines = text.splitlines(keepends=True)
    starts = sorted({len(lines) * j // k for j in range(k)})
    return ["".join(lines[i:]) for i in starts]
