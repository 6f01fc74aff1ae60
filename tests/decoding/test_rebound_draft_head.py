"""A draft rebound on a model (``model.draft = other``, ``dataclasses.replace(model, draft=other)``) decodes with its
own head and embedding: the model's ``draft_head`` kept the assembled draft's ``lm_head``, so the new draft's
proposals were ranked by the old draft's head and the tau reported for it was a mix of the two drafts."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

import draftsmith

PROMPTS = [[5, 9, 2, 7, 1, 40, 41], [3, 4, 70, 71, 72]]


def tau(model) -> float:
    return model.generate(PROMPTS, max_new_tokens=24, stop=[])[0].stats.acceptance_length


@pytest.fixture(scope="module")
def pair():
    good = draftsmith.assemble("demo")
    bad = copy.deepcopy(good)
    with torch.no_grad():   # a head that ranks at random: the draft's proposals are seldom accepted
        head = bad.draft.lm_head.weight
        head.copy_(torch.randn(head.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    return good, bad


def test_the_pair_differs_in_acceptance(pair):
    good, bad = pair
    assert tau(good) > tau(bad) + 0.5


def test_a_rebound_draft_runs_with_its_own_head(pair):
    good, bad = pair
    expected_good, expected_bad = tau(good), tau(bad)
    model = copy.deepcopy(bad)
    model.draft = good.draft
    assert tau(model) == expected_good
    model.draft = copy.deepcopy(bad.draft)
    assert tau(model) == expected_bad
    assert tau(dataclasses.replace(bad, draft=good.draft)) == expected_good
    assert tau(dataclasses.replace(good, draft=bad.draft)) == expected_bad


def test_a_draft_of_another_target_or_none_is_said(pair, tmp_path):
    from draftsmith.errors import ArgumentError
    from draftsmith.testing import write_eagle3, write_target
    target = write_target(tmp_path / "target")   # hidden 64 (the demo target: 128)
    other = draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "draft", target))
    model = copy.deepcopy(pair[0])
    model.draft = other.draft
    with pytest.raises(ArgumentError, match="the draft was made for another target .*width 64 .*the target's: 128"):
        model.generate(PROMPTS, max_new_tokens=4)
    model.draft = None
    with pytest.raises(ArgumentError, match="model.draft is None, not a torch module"):
        model.generate(PROMPTS, max_new_tokens=4)
    model.draft = pair[0].draft   # the model decodes again once a draft of its target is back
    assert model.generate(PROMPTS, max_new_tokens=4, stop=[])[0].token_ids == \
        pair[0].generate(PROMPTS, max_new_tokens=4, stop=[])[0].token_ids


def test_a_tap_at_the_layer_count_is_the_last_state_and_one_past_it_is_said(pair):
    from draftsmith.decoding.arguments import pairing_problems
    model = copy.deepcopy(pair[0])
    layers = len(model.target.model.layers)
    model.draft.fc.taps = (0, layers)         # the last layer's output: a tap the target gives
    assert pairing_problems(model) == []
    model.draft.fc.taps = (0, layers + 1)
    (said,) = pairing_problems(model)
    assert f"taps [{layers + 1}] (the target's: 0..{layers}" in said, said


def test_a_rebound_draft_with_its_own_embedding_runs_with_it(tmp_path):
    """deepseek-mtp drafts hold their own embed_tokens (share.embed: own): a rebound one runs with its own, not
    the first draft's nor the target's."""
    from draftsmith.testing import write_target
    from draftsmith.testing.mtp import write_mtp
    folder = write_mtp(write_target(tmp_path / "t", "deepseek_v3", num_hidden_layers=2), copy_head=False)
    model = draftsmith.assemble("deepseek-mtp", target=folder, draft=folder)
    other = copy.deepcopy(model.draft)
    with torch.no_grad():
        other.embed_tokens.weight.mul_(-1)
    model.draft = other
    model.generate([1, 2, 3], max_new_tokens=3)
    assert model.draft_embed is other.embed_tokens and model.draft_embed is not model.target.model.embed_tokens
    assert model.draft_head is other.lm_head


def test_the_draft_parts_are_read_from_the_draft_not_stored_beside_it(pair):
    # they were fields the model overwrote at each call: a model made with another head, or a replace() giving
    # one, was silently decoded with the draft's own; now they are read (properties) and cannot be given
    good, bad = pair
    model = copy.deepcopy(good)
    model.draft = bad.draft   # no call in between: read at once
    assert model.draft_head is bad.draft.lm_head and model.draft_embed is model.target.model.embed_tokens
    with pytest.raises(TypeError):
        dataclasses.replace(good, draft_head=bad.draft.lm_head)
    with pytest.raises(AttributeError):
        good.draft_head = bad.draft.lm_head
