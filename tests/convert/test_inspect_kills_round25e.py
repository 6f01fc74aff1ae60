"""Kills for convert/inspect.py survivors (round 25e): few_tokens' bounds (a vocabulary of 0 is no reduced head; a
tree already at its bound is not "lowered") and d2t_convention's shape and vocab guards, read on small d2t / t2d
tensors written here."""
import pytest
import torch
from safetensors.torch import save_file

from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.convert.inspect import NO_MAP, d2t_convention, few_tokens
from draftsmith.registry import default_registry
from draftsmith.specs.loader import load_spec


def _decoding(**kw):
    return {"topk": 8, "steps": 3, "draft_tokens": 30, "mode": "auto", "page_size": 1, **kw}


def test_a_zero_vocabulary_is_not_a_reduced_head():
    """catches inspect.py few_tokens: '1 <= vocab < topk' -> '0 <= vocab < topk' (a config whose vocab_size is 0,
    nothing else sized, got decoding.topk 0 and a note, a proposal no schema takes)."""
    reg = default_registry()
    decoding = _decoding()
    assert few_tokens(load_spec("eagle3-llama", reg), reg, {"vocab_size": 0}, {}, decoding) == []
    assert decoding == _decoding()


def test_a_tree_already_at_its_bound_is_left_without_a_note():
    """catches inspect.py few_tokens: 'draft_tokens > most' -> '>=' (a family drafting exactly the 22 nodes a topk-3
    tree of 3 steps holds was told 'decoding.draft_tokens: 22', a change that changed nothing)."""
    reg = default_registry()
    decoding = _decoding(draft_tokens=22)
    notes = few_tokens(load_spec("eagle3-llama", reg), reg, {"vocab_size": 3}, {}, decoding)
    assert notes == ["decoding.topk: 3 (the draft's vocabulary has 3 tokens; the family's topk is more)"]
    assert decoding == _decoding(topk=3, draft_tokens=22)
    decoding = _decoding(draft_tokens=23)   # one over: lowered, and said
    assert len(few_tokens(load_spec("eagle3-llama", reg), reg, {"vocab_size": 3}, {}, decoding)) == 2
    assert decoding["draft_tokens"] == 22


def _folder(folder, d2t, t2d=None):
    folder.mkdir()
    tensors = {"d2t": d2t} if t2d is None else {"d2t": d2t, "t2d": t2d}
    save_file(tensors, folder / "model.safetensors")
    return list_tensors(folder)


OFFSETS = torch.tensor([0, 1, 2, 3])              # draft i -> target 2i (offsets), of 8 target tokens
T2D = torch.tensor([i % 2 == 0 for i in range(8)])


def test_a_sound_one_dimensional_map_is_read_with_or_without_t2d(tmp_path):
    """catches inspect.py d2t_convention: 'd2t.dim() != 1' -> '== 1' or '!= 0' / '!= 2', and 't2d.dim() != 1'
    -> '!= 0' / '!= 2' (a sound 1-D map was said to form no map), and 'has_t2d and t2d.dim() != 1' -> 'or'
    (without t2d: None.dim(), an AttributeError), and the absolute reading's 'd2t - arange' -> '+'."""
    read = d2t_convention(_folder(tmp_path / "a", OFFSETS, T2D), 8)
    assert read == ("offset", "vocab.d2t: offset (target = draft + d2t[draft]; checked against t2d)")
    absolute = OFFSETS + torch.arange(4)
    read = d2t_convention(_folder(tmp_path / "b", absolute, T2D), 8)
    assert read == ("absolute", "vocab.d2t: absolute (d2t holds target ids; checked against t2d)")
    read = d2t_convention(_folder(tmp_path / "c", absolute), 8)   # offsets read 0, 3, 6, 9: outside 8 tokens
    assert read is not None and read[0] == "absolute" and "no t2d to check it against" in read[1]


def test_a_misshapen_d2t_or_t2d_beside_t2d_forms_no_map(tmp_path):
    """catches inspect.py d2t_convention: 'd2t.dim() != 1 or (has_t2d and ...)' -> 'and' (a [1, 1] d2t beside t2d went
    on to check_vocab_map, which broadcasts it into a sound map: 'vocab.d2t: offset (... checked against t2d)' for
    a d2t loading refuses); a 2-D t2d beside a 1-D d2t forms none either."""
    assert d2t_convention(_folder(tmp_path / "a", OFFSETS, T2D.reshape(2, 4)), 8) == ("offset", NO_MAP)
    first = torch.arange(8) == 0   # t2d keeping target token 0: a [1, 1] d2t of 0 passes every check of the map
    assert d2t_convention(_folder(tmp_path / "b", torch.zeros(1, 1, dtype=torch.long), first), 8) == ("offset",
                                                                                                      NO_MAP)


def test_a_map_that_fits_neither_way_beside_t2d_is_said_to_form_none(tmp_path):
    """catches inspect.py d2t_convention: 'has_t2d and sound' -> 'or' (a t2d with no sound reading: sound[0] of
    an empty list, an IndexError, instead of NO_MAP)."""
    assert d2t_convention(_folder(tmp_path / "a", torch.tensor([50, 50, 50, 50]), T2D), 8) == ("offset", NO_MAP)


@pytest.mark.parametrize("vocab", [None, 0, -3, True, 8.0, "8"])
def test_without_t2d_only_a_positive_integer_vocab_decides(tmp_path, vocab):
    """catches inspect.py d2t_convention's guard 'not has_t2d and not (isinstance(vocab, int) and not
    isinstance(vocab, bool) and vocab > 0)' with any 'not' dropped, 'and' -> 'or' or '>' -> '>=' (a vocab of 0, a
    bool or no int at all was read against, a TypeError or a reading no size backs)."""
    absolute = OFFSETS + torch.arange(4)   # only the absolute reading maps into 8 target tokens
    assert d2t_convention(_folder(tmp_path / "a", absolute), vocab) is None
    assert d2t_convention(_folder(tmp_path / "b", absolute), 8)[0] == "absolute"   # the same d2t, a real size
