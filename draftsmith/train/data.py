"""Training text: local text files and record files (JSONL, .json: their records' text, train/records.py) ->
documents -> token ids (a long document tokenized in pieces) -> windows, and the Python standard library as a
corpus (the demo pair's data: everything but the test folders, which hold the held-out text)."""
from __future__ import annotations

import os
import re
import sysconfig
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch

from draftsmith.errors import NotFound, short_text
from draftsmith.train.checks import TrainError
from draftsmith.train.records import Render, json_documents, jsonl_documents

TEXT_SUFFIXES = {".txt", ".py", ".md", ".rst", ".json", ".yaml", ".yml", ".toml", ".c", ".h", ".js", ".ts", ".rs",
                 ".go", ".java", ".cpp", ".sh", ".html", ".css", ""}
RECORD_SUFFIXES = (".jsonl", ".json")   # read record by record (JSONL lines; a .json array of records or one record)
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


def expand(paths: Iterable[str | Path], skip: Iterable[str | Path] = ()) -> list[Path]:
    """Files named directly, and the text / JSONL files under folders (sorted, recursively), but for hidden ones
    (a name under the folder starting with '.': a checkout's .git, a .venv), __pycache__ and those under the
    ``skip`` folders (a run's own --out and features folder inside its --data: its config.json is no data)."""
    found: list[Path] = []
    skipped = [Path(s).resolve() for s in skip]
    for p in map(Path, paths):
        if p.is_dir():
            found += [f for f in sorted(_files_under(p)) if f.is_file()
                      and (f.suffix in TEXT_SUFFIXES or f.suffix == ".jsonl") and not _hidden(f.relative_to(p))
                      and not any(f.resolve().is_relative_to(s) for s in skipped)]
        elif p.is_file():
            found.append(p)
        else:
            raise NotFound(f"no such file or folder: {short_text(p, 300)}")
    return found


def _files_under(folder: Path) -> list[Path]:
    """Every entry under ``folder`` but its folders, hidden ones and __pycache__ not entered (a link to a folder is
    not followed, as ``rglob`` does not); a folder that cannot be listed is its OSError ('Permission denied', naming
    it), where ``rglob`` left it out without a word."""
    def refuse(error: OSError) -> None:
        raise error

    out = []
    for root, folders, names in os.walk(folder, onerror=refuse):
        folders[:] = [f for f in folders if not _hidden(Path(f))]   # a checkout's .git, a .venv: never read
        out += [Path(root, name) for name in names]
    return out


def _hidden(relative: Path) -> bool:
    return "__pycache__" in relative.parts or any(part.startswith(".") for part in relative.parts)


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
    not UTF-8 is a TrainError naming it; other files that are not UTF-8 are skipped (and appended to ``skipped``
    when given, for the caller to count); a file the file system refuses is a problem naming it ('Permission
    denied'), never skipped. A file's reading stops at its first problem, and the next file is read: one TrainError
    names the first problem of each file that has one."""
    docs, found = [], []
    for f in files:
        try:
            docs += file_documents(f, textless, render)
        except UnicodeDecodeError:
            if skipped is not None:
                skipped.append(f)
        except OSError as e:
            found.append(("", f"{short_text(f, 300)}: {e.strerror or short_text(e, 200)}"))
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
        cut = _CUT.search(doc, start + size)
        if cut is None:
            break
        yield doc[start:cut.end()], False
        start = cut.end()
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
