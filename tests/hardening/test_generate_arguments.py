"""generate() arguments: every problem at once as an ArgumentError (a DraftsmithError), before anything runs."""
import dataclasses
import warnings

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import draftsmith
from draftsmith.errors import ArgumentError

from hardening_helpers import quick, refused


@pytest.fixture(scope="module")
def model(tiny_pair):
    return draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=tiny_pair[1])  # vocab 32, context 64


@pytest.mark.parametrize("prompt, kw, says", [
    ([], {}, "empty list"),
    ([[]], {}, "no tokens"),
    ([40], {}, "outside the model's vocabulary 0..31"),
    ([-1], {}, "outside the model's vocabulary"),
    ([1.0, 2], {}, "token 0 is 1.0"),
    ([True], {}, "token 0 is True"),
    (b"abc", {}, "bytes"),
    (3.5, {}, "is not a prompt"),
    (None, {}, "is not a prompt"),
    (torch.tensor([[1, 2]]), {}, "2-D tensor"),
    (torch.tensor([1.0, 2.0]), {}, "float32"),
    (np.array([1.0]), {}, "float64"),
    ("text", {}, "needs a tokenizer"),
    ([1, 2], {"topk": 100}, "topk"),
    ([1, 2], {"topk": -1}, "topk"),
    ([1, 2], {"topk": True}, "topk: True is not allowed"),
    ([1, 2], {"steps": 0}, "steps: 0 is not allowed"),
    ([1, 2], {"steps": "5"}, "steps: '5' is not allowed"),
    ([1, 2], {"draft_tokens": 8.0}, "draft_tokens: 8.0 is not allowed"),
    ([1, 2], {"mode": "v3"}, "mode: 'v3' is not allowed"),
    ([1, 2], {"temperature": -0.5}, "temperature is -0.5"),
    ([1, 2], {"temperature": float("nan")}, "temperature is nan"),
    ([1, 2], {"top_p": 0}, "top_p is 0"),
    ([1, 2], {"top_p": 1.5}, "top_p is 1.5"),
    ([1, 2], {"top_k": -1}, "top_k is -1"),
    ([1, 2], {"max_new_tokens": 2.5}, "max_new_tokens is 2.5"),
    ([1, 2], {"max_new_tokens": 0}, "max_new_tokens is 0"),
    ([1, 2], {"max_new_tokens": 2**70}, "max_new_tokens is 1180591620717411303424; an integer in 1..1048576"),
    ([1, 2], {"seed": 2**64, "temperature": 1.0}, "seed is"),
    ([1, 2], {"seed": 1.5, "temperature": 1.0}, "seed is 1.5"),
    ([1, 2], {"stop": "x"}, "stop is 'x'"),
    ([1, 2], {"stop": [1.5]}, "stop holds [1.5]"),
    ([1] * 65, {}, "65 tokens; the target's context"),
])
def test_bad_arguments_are_refused_with_a_clear_message(model, prompt, kw, says):
    with refused(kind=ArgumentError) as r:
        model.generate(prompt, **{"max_new_tokens": 2, **kw})
    assert says in str(r.value), str(r.value)


def test_topk_above_the_draft_vocabulary_is_refused(tiny_pair, tmp_path):
    from draftsmith.testing import write_eagle3

    draft = write_eagle3(tmp_path / "d", tiny_pair[0], draft_vocab=6)
    small = draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=draft)
    with refused(kind=ArgumentError) as r:
        small.generate([1, 2], max_new_tokens=2, topk=8)
    assert "the draft's vocabulary has 6 tokens" in str(r.value)


def test_every_problem_is_listed_at_once_and_baseline_checks_too(model):
    with refused(kind=ArgumentError) as r:
        model.generate([], steps=0, top_p=2, mode="v9")
    assert str(r.value).startswith("generate(): 4 problems")
    with refused(kind=ArgumentError) as r:
        model.generate_baseline([99], temperature=-1)
    assert str(r.value).startswith("generate_baseline(): 2 problems")


def test_ids_from_a_tokenizer_larger_than_the_model_are_refused(model):
    class Big:
        def encode(self, text):
            return [1, 500, 2]

        def decode(self, ids, **_):
            return ""

    with refused(kind=ArgumentError) as r:
        dataclasses.replace(model, tokenizer=Big()).generate("hi", max_new_tokens=2)
    assert "the tokenizer produced ids outside the model's vocabulary 0..31: [500]" in str(r.value)


def test_integer_tensors_and_arrays_are_ids_and_batches_mix_forms(model):
    ref = model.generate([1, 2, 3], max_new_tokens=3).token_ids
    assert model.generate(torch.tensor([1, 2, 3]), max_new_tokens=3).token_ids == ref
    assert model.generate(np.array([1, 2, 3], dtype=np.int32), max_new_tokens=3).token_ids == ref
    assert model.generate((np.int64(1), 2, 3), max_new_tokens=3).token_ids == ref
    outs = model.generate([torch.tensor([1, 2, 3]), [1, 2, 3]], max_new_tokens=3)
    assert [o.token_ids for o in outs] == [ref, ref]


def test_arguments_that_do_not_apply_are_not_refused(model):
    chain = model.generate([1, 2, 3], max_new_tokens=3, topk=1, draft_tokens=30)  # draft_tokens: not for a chain
    assert chain.stats.mode == "v1" and len(chain.token_ids) == 3
    model.generate_baseline([1, 2, 3], max_new_tokens=3, topk=1, steps=2)     # drafting args: ignored


@pytest.mark.parametrize("length, new", [(64, 1), (63, 2), (60, 5)])
def test_a_call_feeding_the_whole_context_decodes_its_last_token_unfed(model, length, new):
    # the last new token is never fed: a 64-token prompt on this 64-token target gets its next token
    ids = [(i * 5) % 7 + 1 for i in range(length)]
    want = model.generate_baseline(ids, max_new_tokens=new, stop=[]).token_ids
    assert len(want) == new and model.generate(ids, max_new_tokens=new, stop=[]).token_ids == want


@pytest.mark.parametrize("kw", [dict(mode="v1", steps=1), dict(mode="v1", topk=4, steps=2, draft_tokens=30)])
def test_a_v1_call_is_a_chain_whatever_topk_and_draft_tokens_say(model, kw):
    # a review: mode="v1", steps=1 was refused ("8 tokens cannot be drafted with topk=4, steps=1")
    plan = model.plan(**kw)
    assert (plan.mode, plan.topk, plan.draft_tokens) == ("v1", 1, kw["steps"] + 1)
    ids = [3, 1, 4, 1, 5]
    base = model.generate_baseline(ids, max_new_tokens=7).token_ids
    assert model.generate(ids, max_new_tokens=7, **kw).token_ids == base


def test_a_call_running_past_the_context_is_refused(model):
    """The KV pools are sized for prompt + max_new_tokens up front: the target's context bounds that, not the user's
    max_new_tokens (287818 on this 64-token target once ran for half an hour inside the Hypothesis test below)."""
    with refused(kind=ArgumentError) as r:
        model.generate([1] * 60, max_new_tokens=6)
    assert "with a 60-token prompt it runs past the target's context of 64 tokens" in str(r.value)
    assert "at most 5 new tokens fit (the last one is never fed)" in str(r.value)
    with refused(kind=ArgumentError):
        model.generate_baseline([[1], [1] * 60], max_new_tokens=6)   # the longest prompt of a batch counts
    with refused(kind=ArgumentError):
        model.generate([23, 23], max_new_tokens=287818)
    assert len(model.generate([1] * 60, max_new_tokens=4, stop=[]).token_ids) == 4   # exactly the context fits


ARG_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=5),
                       st.lists(st.integers(-3, 40), max_size=3), st.binary(max_size=3))


@settings(max_examples=60)
@example(name="max_new_tokens", value=287818, prompt=[23, 23])   # valid before the context bound: ran for half an hour
@example(name="temperature", value=2**64, prompt=[1])   # a valid int past int64: OverflowError in the logits' division
@given(st.sampled_from(["max_new_tokens", "temperature", "top_p", "top_k", "seed", "stop", "topk", "steps",
                        "draft_tokens", "mode"]), ARG_VALUES,
       st.one_of(st.lists(st.integers(-2, 40), max_size=4), ARG_VALUES))
def test_any_argument_value_runs_or_ends_in_an_argument_error(model, name, value, prompt):
    with quick():
        kw = {"max_new_tokens": 2, name: value}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.generate(prompt, **kw)
        except ArgumentError as e:
            assert len(str(e)) < 3000
