"""check_vocab_map on hand-built maps that break one rule of invariant 24 while satisfying the others.

tests/assembler/test_drafts.py drives the valid maps make_vocab_map builds; here each broken map is built so that
only the rule under test can catch it (t2d is consistent with the ids, the count is right, the ids are in range).
"""

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from draftsmith.assembler.vocab import VocabMapError, check_vocab_map


def _map(target_ids: list[int], vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    # (d2t, t2d) whose draft token d maps to target_ids[d]; t2d marks exactly the distinct ids, padded with the
    # lowest unused ids so that its count equals the draft vocabulary
    ids = torch.tensor(target_ids)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    for t in range(vocab):
        if int(t2d.sum()) >= len(target_ids):
            break
        t2d[t] = True
    return ids - torch.arange(len(target_ids)), t2d


@pytest.mark.parametrize("ids", [[3, 3], [2, 7, 7], [5, 2]], ids=["two-equal", "repeat-at-end", "two-decreasing"])
def test_a_map_of_two_draft_tokens_or_more_that_does_not_increase_is_refused(ids):
    d2t, t2d = _map(ids, 8)
    with pytest.raises(VocabMapError, match="is not strictly increasing"):
        check_vocab_map(d2t, t2d)


def test_a_map_that_rises_above_its_first_id_but_not_step_by_step_is_refused():
    d2t, t2d = _map([0, 5, 3], 8)                 # every id exceeds the first, yet 5 -> 3 goes down
    with pytest.raises(VocabMapError, match="is not strictly increasing"):
        check_vocab_map(d2t, t2d)


@given(st.lists(st.integers(0, 40), min_size=2, max_size=12, unique=True), st.randoms())
def test_any_unsorted_order_of_kept_tokens_is_refused(kept, rng):
    rng.shuffle(kept)
    assume(kept != sorted(kept))
    d2t, t2d = _map(kept, 41)
    with pytest.raises(VocabMapError, match="is not strictly increasing"):
        check_vocab_map(d2t, t2d)


def test_a_single_token_draft_vocabulary_is_valid():
    d2t, t2d = _map([6], 8)
    check_vocab_map(d2t, t2d)


def test_an_id_past_the_target_vocabulary_is_refused_naming_the_last_valid_id():
    d2t = torch.tensor([0, 19])                   # target ids 0 and 20 in a vocabulary of 12 (ids 0..11)
    t2d = torch.zeros(12, dtype=torch.bool)
    t2d[:2] = True
    with pytest.raises(VocabMapError, match=r"leaves the target vocabulary 0\.\.11$"):
        check_vocab_map(d2t, t2d, source="my-draft")
