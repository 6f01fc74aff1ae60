"""Training text: local text / JSONL files -> documents -> token windows, and the Python standard library as a
corpus (the demo pair's data: everything but the test folders, which hold the held-out text)."""
from __future__ import annotations

import json
import re
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from draftsmith.errors import NotFound, short, short_text
from draftsmith.train.checks import TrainError

TEXT_SUFFIXES = {".txt", ".py", ".md", ".rst", ".json", ".yaml", ".yml", ".toml", ".c", ".h", ".js", ".ts", ".rs",
                 ".go", ".java", ".cpp", ".sh", ".html", ".css", ""}
TEST_DIRS = ("test", "tests", "idle_test")  # path parts that mark the stdlib's test code


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


def expand(paths: Iterable[str | Path]) -> list[Path]:
    """Files named directly, and the text / JSONL files under folders (sorted, recursively)."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found += [f for f in sorted(p.rglob("*")) if f.is_file()
                      and (f.suffix in TEXT_SUFFIXES or f.suffix == ".jsonl") and "__pycache__" not in f.parts]
        elif p.is_file():
            found.append(p)
        else:
            raise NotFound(f"no such file or folder: {short_text(p, 300)}")
    return found


def jsonl_text(record: dict) -> str | None:
    """One JSONL record's text: `text`, else `prompt` + `completion` (either may be missing), else chat `messages`
    contents joined; None when it has none of these fields (or only null ones), which the reader counts. A content
    (or completion) is a string, null (empty: an assistant turn that only calls a tool) or a list of OpenAI-style
    parts whose text parts are joined by newlines (other parts, such as images, are skipped); `text` and `prompt`
    are a string or null, `messages` a list of objects; any other value is a ValueError saying which field holds
    what (dropping the record silently would train on less data than the file holds, unsaid)."""
    for key in ("text", "prompt"):
        if record.get(key) is not None and not isinstance(record[key], str):
            raise ValueError(f"{key} is {short(record[key], 60)}: expected a string or null")
    if isinstance(record.get("text"), str):
        return record["text"]
    if record.get("prompt") is not None or record.get("completion") is not None:
        return (record.get("prompt") or "") + content_text(record.get("completion"), "completion")
    messages = record.get("messages")
    if messages is None:
        return None
    if not isinstance(messages, list):
        raise ValueError(f"messages is {short(messages, 60)}: expected a list of messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ValueError(f"messages[{i}] is {short(m, 60)}: expected a message object like "
                             '{"role": "user", "content": "..."}')
    return "\n".join(content_text(m.get("content"), f"messages[{i}].content") for i, m in enumerate(messages))


def content_text(value, field: str) -> str:
    """A completion's or a message content's text (see :func:`jsonl_text`)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        texts = [p.get("text") for p in value if p.get("type", "text") == "text"]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(texts)
    raise ValueError(f"{field} is {short(value, 60)}: expected a string, null or a list of parts like "
                     '{"type": "text", "text": "..."}')


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


def jsonl_documents(f: Path, text: str, textless: list[str] | None = None) -> list[str]:
    """The documents of the JSONL file ``f`` (read as ``text``): one per line with text; a line without any (no
    text field, or an empty one) is appended to ``textless`` as "FILE:N" when given. Lines end at "\n" only
    (U+2028 or U+0085 inside a string is text, as JSON allows); a line that is not a JSON object, a text field of
    another type, or text holding a lone surrogate is a TrainError naming the file and line."""
    docs = []
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            t = jsonl_text(jsonl_record(f, n, line))
        except ValueError as e:
            if isinstance(e, TrainError):
                raise
            raise TrainError([("", f"{short_text(f, 300)}:{n}: {e}")]) from None
        if t and (bad := SURROGATE.search(t)):
            raise TrainError([("", f"{short_text(f, 300)}:{n}: the text holds a lone surrogate "
                                   f"(U+{ord(bad.group()):04X} at character {bad.start()}), which is not a "
                                   "character: no tokenizer can encode it")])
        if t:
            docs.append(t)
        elif textless is not None:
            textless.append(f"{f}:{n}")
    return docs


def read_documents(files: Sequence[Path], skipped: list[Path] | None = None,
                   textless: list[str] | None = None) -> list[str]:
    """Each text file is one document; each JSONL line with text is one (see :func:`jsonl_documents`, which
    appends the lines without text to ``textless``). A JSONL file that is not UTF-8 is a TrainError naming it;
    other unreadable or undecodable files are skipped (and appended to ``skipped`` when given, for the caller to
    count)."""
    docs = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8-sig")  # a leading BOM (Windows editors) is not text
        except UnicodeDecodeError as e:
            if f.suffix == ".jsonl":
                raise TrainError([("", f"{short_text(f, 300)}: not UTF-8 text (byte {e.object[e.start]:#04x} at "
                                       f"offset {e.start}), so not JSONL")]) from None
            if skipped is not None:
                skipped.append(f)
            continue
        except OSError:
            if skipped is not None:
                skipped.append(f)
            continue
        if f.suffix == ".jsonl":
            docs += jsonl_documents(f, text, textless)
        elif text.strip():
            docs.append(text)
    return docs


def encode(docs: Sequence[str], tokenizer, sep: int | None) -> torch.Tensor:
    """[N] int64: the documents' tokens concatenated, each followed by ``sep`` (e.g. eos) when given."""
    ids: list[int] = []
    for enc in tokenizer(list(docs), add_special_tokens=False)["input_ids"]:
        ids += enc
        if sep is not None:
            ids.append(sep)
    return torch.tensor(ids, dtype=torch.long)


def windows(ids: torch.Tensor, seq: int, seed: int = 0) -> torch.Tensor:
    """[N // seq, seq]: non-overlapping windows in a seeded random order (a partial pass sees all the data)."""
    n = len(ids) // seq
    w = ids[: n * seq].view(n, seq)
    return w[torch.randperm(n, generator=torch.Generator().manual_seed(seed))]


def held_out_prompts(files: Sequence[Path], tokenizer, n: int, prompt_tokens: int, seed: int = 0) -> list[list[int]]:
    """``n`` prompts of ``prompt_tokens`` tokens, each from a different file (a seeded choice), starting at a line
    boundary a third of the way in (past the imports and the header)."""
    g = torch.Generator().manual_seed(seed)
    prompts = []
    for i in torch.randperm(len(files), generator=g).tolist():
        text = files[i].read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        text = "".join(lines[len(lines) // 3:])
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) >= prompt_tokens + 64:
            prompts.append(ids[:prompt_tokens])
        if len(prompts) == n:
            break
    return prompts


def line_offsets(text: str, k: int) -> list[str]:
    """``k`` suffixes of ``text``, starting at the line starts j / k of the way through its lines (j < k, distinct;
    j = 0 is the whole text)."""
    lines = text.splitlines(keepends=True)
    starts = sorted({len(lines) * j // k for j in range(k)})
    return ["".join(lines[i:]) for i in starts]
