"""Mutation round 26c on draftsmith.decoding.model (generate's once-per-model warning of a call's tree that cannot
reach its steps, plan, generate_baseline): the warning is for a call's overrides only, never the spec's own values
again; plan's reason and mode name only what decides a chain or a tree; generate_baseline takes generate's
defaults; a stop iterator is read up to the target's vocabulary, not the draft's reduced one."""

import dataclasses
import inspect
import logging

import pytest

import draftsmith
from draftsmith.decoding.arguments import vocab_sizes
from draftsmith.decoding.model import SpeculativeModel


@pytest.fixture(scope="module")
def demo():
    return draftsmith.assemble("demo")


def test_a_specs_own_tree_that_cannot_reach_its_steps_is_not_warned_again_by_a_call(caplog):
    """The spec's draft_tokens 3 under steps 5 is warned of at its load (as the spec's); a generate() without
    overrides says nothing more, and one with overrides that reach their steps neither. Kills the override test
    `(topk, steps, draft_tokens) != (None,) * 3` -> `* 4` / `* 2` (always true: the spec's values warned again as a
    call's overrides)."""
    model = draftsmith.assemble(draftsmith.load_spec("demo").with_decoding(draft_tokens=3))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model.generate([1, 2, 3], max_new_tokens=2)
        model.generate([1, 2, 3], max_new_tokens=2, steps=2)   # depth 2 reached: nothing to say
    assert [r.getMessage() for r in caplog.records if "overrides" in r.getMessage()] == []
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model.generate([1, 2, 3], max_new_tokens=2, steps=4)
    assert [r.getMessage() for r in caplog.records if "overrides" in r.getMessage()] == [
        "draftsmith: generate() overrides of spec demo: decoding.steps is 4, but a tree of draft_tokens 3 (the root "
        "counted) reaches depth 2 at most: steps 2 drafts the same tree with 2 fewer draft forwards a step"]


def test_a_sweep_of_overrides_hears_of_each_tree_that_cannot_reach_its_steps_once(caplog):
    """A researcher's sweep: each wasteful tree is said once (the same one twice: once), not only the first of the
    model's life (a walk-through of round 28: steps 4 then 5 over draft_tokens 3, the second said nothing)."""
    model = draftsmith.assemble(draftsmith.load_spec("demo").with_decoding(draft_tokens=3))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        for steps in (4, 5, 4):
            model.generate([1, 2, 3], max_new_tokens=2, steps=steps)
    said = [r.getMessage() for r in caplog.records if "overrides" in r.getMessage()]
    assert [m.split("decoding.steps is ")[1][:1] for m in said] == ["4", "5"], said


def test_a_chain_asked_of_a_recurrent_target_is_a_chain_for_its_topk_alone(demo):
    """topk 1 is a chain whatever else rules trees out: the reason names 'topk is 1' only, not the recurrent layers
    (kills `tree = dec['topk'] > 1` -> `>= 1` / `> 0`); topk 2 is a tree asked for, so a recurrent target makes it
    v1 (kills `> 1` -> `> 2`, which planned v2 for a recurrent target at topk 2)."""
    recurrent = dataclasses.replace(demo, recurrent=True)
    assert recurrent.plan(topk=1).reason == "auto chose v1 (chain): topk is 1"
    two = recurrent.plan(topk=2)
    assert (two.mode, two.topk) == ("v1", 1) and "recurrent" in two.reason, two
    assert demo.plan(topk=2).mode == "v2"   # the same call on the plain target drafts a tree


def test_generate_baseline_takes_generates_defaults():
    """One dict of keywords serves both calls, and none at all gives the same decoding: generate_baseline's defaults
    are generate's (kills max_new_tokens 64 -> 63 / 65 and top_k 0 -> 1 in generate_baseline's signature)."""
    ours, theirs = (inspect.signature(f).parameters for f in (SpeculativeModel.generate_baseline,
                                                                SpeculativeModel.generate))
    assert {k: p.default for k, p in ours.items() if k != "self"} == \
        {k: theirs[k].default for k in ours if k != "self"}
    assert (ours["max_new_tokens"].default, ours["top_k"].default) == (64, 0)


@pytest.mark.parametrize("call", ["generate", "generate_baseline"])
def test_a_stop_iterator_is_read_up_to_the_targets_vocabulary_not_the_drafts(demo, call):
    """demo's draft keeps 192 of the target's 258 tokens. A stop generator of 194 ids whose last is the first token
    greedy decoding makes stops the row there: it is read whole (up to 259 ids). Kills `vocab_sizes(self)[0]` ->
    `[1]` in generate / generate_baseline: read up to 193 ids, the last dropped and the row went on."""
    target, draft, _ = vocab_sizes(demo)
    assert (target, draft) == (258, 192)
    fn = getattr(demo, call)
    first = fn([1, 2, 3], max_new_tokens=1, stop=[]).token_ids[0]
    ids = [i for i in range(target) if i != first][:draft + 1] + [first]   # 194 ids, ``first`` last
    out = fn([1, 2, 3], max_new_tokens=6, stop=(i for i in ids)).token_ids
    assert out[0] == first and len(out) == 1, out
