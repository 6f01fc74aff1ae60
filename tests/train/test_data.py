"""Training data: the stdlib split, JSONL records, documents, encoding, windows, held-out prompts and
self-distillation offsets, with a character tokenizer so every expected id can be written down."""
import json

import pytest
import torch

from draftsmith.train import data as D
from draftsmith.train import records as R


def chars(texts, add_special_tokens=True):
    """A tokenizer with the Hugging Face call shape: one id per character (its code point), after a BOS id 1 when
    asked for special tokens (as Hugging Face's default is)."""
    one = lambda t: [1] * add_special_tokens + [ord(c) for c in t]  # noqa: E731
    return {"input_ids": one(texts) if isinstance(texts, str) else [one(t) for t in texts]}


def test_stdlib_splits_into_training_files_and_held_out_test_files():
    root = D.stdlib_dir()
    train, held = D.stdlib_files(), D.stdlib_files(held_out=True)
    in_test = lambda f: any(p in D.TEST_DIRS for p in f.relative_to(root).parts[:-1])  # noqa: E731
    assert train and held and not set(train) & set(held)
    assert not any(map(in_test, train)) and all(map(in_test, held))
    assert train == sorted(train) and root / "heapq.py" in train
    assert not any("site-packages" in f.parts for f in train + held)


@pytest.mark.parametrize("record, text", [
    ({"text": "t", "prompt": "p"}, "t"),
    ({"prompt": "p", "completion": "c"}, "pc"),
    ({"prompt": "p"}, "p"),
    ({"completion": "c"}, "c"),
    ({"prompt": None, "completion": "c", "messages": [{"content": "m"}]}, "c"),
    ({"messages": [{"content": "a"}, {"role": "x", "content": None}, {"content": "b"}]}, "a\n\nb"),
    ({"text": None, "prompt": "p"}, "p"),
    ({"text": None, "prompt": None, "completion": None}, None),
    ({}, None),
])
def test_jsonl_records_give_text_then_prompt_and_completion_then_messages(record, text):
    assert R.jsonl_text(record) == text


def test_documents_are_files_and_jsonl_lines_with_text(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "blank.txt").write_text("  \n")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\xfa")
    (tmp_path / "w.bin").write_bytes(b"\0")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.py").write_text("cached = 1\n")
    (tmp_path / "d.jsonl").write_text("\n".join([json.dumps({"text": "one"}), "", json.dumps({"x": 1}),
                                                 json.dumps({"prompt": "two"})]) + "\n")
    files = D.expand([tmp_path])
    assert [f.name for f in files] == ["a.py", "bad.txt", "blank.txt", "d.jsonl"]
    textless = []
    assert D.read_documents(files, textless=textless) == ["x = 1\n", "one", "two"]
    assert textless == [f"{tmp_path / 'd.jsonl'}:3"]
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        D.expand([tmp_path / "missing"])


@pytest.mark.parametrize("sep, ids", [(None, [97, 98, 99]), (0, [97, 98, 0, 99, 0])])
def test_encode_concatenates_documents_with_a_separator_after_each(sep, ids):
    out = D.encode(["ab", "c"], chars, sep)
    assert out.dtype == torch.long and out.tolist() == ids


def test_windows_are_every_whole_chunk_once_in_a_seeded_order():
    w = D.windows(torch.arange(23), 5, seed=1)
    assert w.shape == (4, 5)
    assert sorted(w[:, 0].tolist()) == [0, 5, 10, 15] and torch.equal(w - w[:, :1], torch.arange(5).expand(4, -1))
    assert torch.equal(w, D.windows(torch.arange(23), 5, seed=1))
    assert torch.equal(D.windows(torch.arange(23), 5), D.windows(torch.arange(23), 5, seed=0))
    assert any(not torch.equal(w, D.windows(torch.arange(23), 5, seed=s)) for s in range(2, 6))


def test_held_out_prompts_start_a_third_in_and_skip_short_files(tmp_path):
    """Each prompt is the first 10 ids from the line a third of the way in, and only from a file that has at least
    10 + 64 ids from there (f1: exactly 74, f2: 73)."""
    texts = ["".join(f"A{k}" + "." * 20 + "\n" for k in range(9)),
             "B0\nB1\nB2" + "." * 68 + "\n",
             "C0\nC1\nC2" + "." * 67 + "\n",
             "".join(f"D{k}" + "." * 20 + "\n" for k in range(9))]
    files = []
    for i, text in enumerate(texts):
        files.append(tmp_path / f"f{i}.py")
        files[-1].write_text(text)
    prompts = D.held_out_prompts(files, chars, n=5, prompt_tokens=10)
    assert sorted(bytes(p).decode() for p in prompts) == ["A3" + "." * 8, "B1\nB2" + "." * 5, "D3" + "." * 8]
    assert len(D.held_out_prompts(files, chars, n=2, prompt_tokens=10)) == 2
    assert D.held_out_prompts(files, chars, n=2, prompt_tokens=10) == D.held_out_prompts(files, chars, 2, 10, seed=0)


@pytest.mark.parametrize("k, firsts", [(1, ["0"]), (3, ["0", "3", "6"]), (12, [str(i) for i in range(9)])])
def test_line_offsets_start_at_distinct_line_starts_j_over_k_of_the_way(k, firsts):
    text = "".join(f"{i}\n" for i in range(9))
    out = D.line_offsets(text, k)
    assert [o[0] for o in out] == firsts and all(text.endswith(o) for o in out)
