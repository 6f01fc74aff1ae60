"""A document longer than a tokenizer batch is tokenized in pieces (a corpus shipped as one 540 MB file took ~520
bytes a token in one call), cut where byte-level BPE pre-tokenizers split anyway: the ids are the whole document's,
for a GPT-2 style and a Llama-3 style pre-tokenizer with merges of whitespace runs ("\\n\\n", "\\n    ")."""
from __future__ import annotations

import pytest
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from draftsmith.train import data as D

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
TEXT = [p.read_text() for p in D.stdlib_files()[:12]] + [
    "héllo wörld\n\n\n  x\ny\r\nz\n\tq\n" * 40, "a\nb\nc", "日本語\nテキスト\n" * 20, "no line break at all " * 60,
    "ends with spaces\n   ", "x)\n(y\n\n\nz",
    # wikitext-103's layout: every line opens with a space (a cut only between two non-spaces made one piece)
    " \n = Valkyria Chronicles III = \n \n Senjō no Valkyria 3 : Unrecorded Chronicles \n \n = = Gameplay = = \n"
    " As with previous games , the player \n  two spaces\n \tand a tab\n" * 30]


def bpe(pre_tokenizer) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel
                                                      .alphabet(), show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok)


TOKENIZERS = {
    "gpt2": lambda: bpe(pre_tokenizers.ByteLevel(add_prefix_space=False)),
    "llama3": lambda: bpe(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])),
}


@pytest.fixture(scope="module", params=sorted(TOKENIZERS))
def tok(request):
    made = TOKENIZERS[request.param]()
    whitespace_runs = [t for t in made.get_vocab() if set(t) <= {"Ċ", "Ġ"} and len(t) > 1]   # "\n\n", "\n  "...
    assert whitespace_runs, "the test tokenizer must merge whitespace runs, or any cut would give the same ids"
    return made


@pytest.mark.parametrize("chars", [1, 7, 100, 1000, 1 << 20])
def test_a_long_document_in_pieces_gives_the_ids_of_one_call(tok, monkeypatch, chars):
    whole = [i for enc in tok(TEXT, add_special_tokens=False)["input_ids"] for i in (*enc, 0)]
    monkeypatch.setattr(D, "ENCODE_CHARS", chars)
    assert D.encode(TEXT, tok, 0).tolist() == whole   # the separator after each document, never after a piece


def test_a_cut_after_any_line_break_would_change_the_ids(monkeypatch):
    # what the cut rule guards against (GPT-2's pre-tokenizer): "x\n\n" at a text's end is one pre-token, "\n" then
    # "\n" inside a text
    tok = TOKENIZERS["gpt2"]()
    whole = tok(TEXT, add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(D, "_CUT", D.re.compile(r"\n(?=\S)"))
    monkeypatch.setattr(D, "ENCODE_CHARS", 7)
    assert D.encode(TEXT, tok, None).tolist() != [i for enc in whole for i in enc]


def test_pieces_are_cut_between_two_characters_that_are_not_whitespace():
    doc = "ab\n\ncd\n  ef\ngh\nij"
    assert list(D.pieces(doc, 2)) == [("ab\n\ncd\n  ef\n", False), ("gh\n", False), ("ij", True)]
    assert list(D.pieces(doc, 3)) == [("ab\n\ncd\n  ef\n", False), ("gh\nij", True)]   # no cut 3 past "gh\n"
    assert "".join(p for p, _ in D.pieces(doc, 1)) == doc
    assert list(D.pieces(doc, len(doc))) == [(doc, True)]   # no longer than a piece: whole
    assert list(D.pieces("x" * 50, 3)) == [("x" * 50, True)]   # nowhere to cut: one piece
    assert list(D.pieces("", 3)) == [("", True)]
    assert list(D.pieces(" a\n b\n  c\n b", 2)) == [(" a\n", False), (" b\n  c\n", False), (" b", True)]
