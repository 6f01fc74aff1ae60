"""Mutation survivors of train/data_checks.py (round 25d): which ids ids_outside lists (id 0 fits; only ids below 0
or at/past vocab_size are named), the vocabulary range it says, and which field no_windows blames (the data when it
held no document, --seq when it held text too short for a window). Expected texts are written here by hand."""
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from draftsmith.testing import write_target
from draftsmith.train.data_checks import ids_outside, no_windows


@pytest.fixture(scope="module")
def vocab200(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("dc25d") / "t", vocab_size=200, bos_token_id=0, eos_token_id=1)


def test_ids_outside_names_only_the_ids_past_the_vocabulary_and_its_range(vocab200):
    """ids 0, 0, 5, 199, 200, -1, 200 against vocab_size 200: three tokens outside, ids -1 and 200 (sorted, each
    once); 0 and 199 fit, and the range said is 0..199."""
    error = ids_outside(SimpleNamespace(target=vocab200), torch.tensor([0, 0, 5, 199, 200, -1, 200]), "the batch")
    assert error is not None and [field for field, _ in error.problems] == ["target"]
    assert str(error) == (f"target {vocab200}: its tokenizer gave ids outside the target's vocabulary 0..199 "
                          "(3 tokens of the batch, ids -1, 200): is the tokenizer in the target folder this model's?")


def test_an_id_0_beside_an_id_past_the_vocabulary_is_not_named(vocab200):
    error = ids_outside(SimpleNamespace(target=vocab200), torch.tensor([0, 0, 250]))
    assert "(1 token of the data, ids 250)" in str(error), str(error)


def _job(tmp_path):
    return SimpleNamespace(seq=48, data=[tmp_path / "corpus"])


def test_no_document_blames_the_data(tmp_path):
    """Files that gave no document at all: the data option is named ('no text'), not --seq."""
    error = no_windows(_job(tmp_path), [Path("a.bin")], [], torch.tensor([], dtype=torch.long), [Path("a.bin")])
    assert [field for field, _ in error.problems] == ["data"]
    assert str(error) == (f"data {tmp_path / 'corpus'}: the data gave no training windows (1 file, 0 documents, "
                          "0 tokens in all, 1 file skipped (not UTF-8 text): a.bin: no text)")


def test_documents_too_short_for_a_window_blame_the_window_length(tmp_path):
    """Documents were read but none is a window long: --seq is named, with the window length."""
    error = no_windows(_job(tmp_path), [Path("a.txt"), Path("b.txt")], ["hi", "yo"], torch.arange(7))
    assert [field for field, _ in error.problems] == ["seq"]
    assert str(error) == ("seq 48: the data gave no training windows (2 files, 2 documents, 7 tokens in all; "
                          "a window is 48 tokens)")


@pytest.mark.parametrize("length", [300, 301])
def test_the_target_path_is_said_whole_up_to_300_characters_then_cut_in_the_middle(tmp_path, length):
    """A target folder path of 300 characters is said whole; one of 301 is cut to 148 + '...' + 148 (its two ends)."""
    pad = length - len(str(tmp_path / "x" / "t"))
    target = write_target(tmp_path / ("x" * (pad + 1)) / "t", vocab_size=200, bos_token_id=0, eos_token_id=1)
    path = str(target)
    assert len(path) == length
    said = path if length == 300 else path[:148] + "..." + path[-148:]
    error = ids_outside(SimpleNamespace(target=target), torch.tensor([300]))
    assert str(error).startswith(f"target {said}: its tokenizer gave ids outside the target's vocabulary 0..199 "), \
        str(error)
