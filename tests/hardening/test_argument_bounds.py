"""Every check of draftsmith/decoding/arguments.py and prompts.py at its edge: the last value accepted and the first
refused, so that deleting a check or moving its bound by one fails a test (test_generate_arguments.py holds the
clearly wrong values and the messages)."""
import inspect
import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import draftsmith
from draftsmith import limits
from draftsmith.decoding.arguments import check_call, overridden, settings_problems, vocab_sizes
from draftsmith.decoding.settings import SEED_RANGE
from draftsmith.decoding.prompts import MOST
from draftsmith.specs.schema import Decoding
from draftsmith.errors import ArgumentError

from hardening_helpers import refused

VOCAB, CONTEXT = 32, 64   # the tiny pair's target


@pytest.fixture(scope="module")
def model(tiny_pair):
    return draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=tiny_pair[1])


def problems(model, prompt=None, **kw) -> list[str]:
    """The problems generate() lists ([] when the call runs; it then runs for one token unless told otherwise)."""
    try:
        model.generate([1, 2] if prompt is None else prompt, **{"max_new_tokens": 1, **kw})
    except ArgumentError as e:
        return e.problems
    return []


def settings(**kw) -> list[str]:
    """settings_problems() alone, everything else at its default."""
    args = dict(max_new_tokens=1, temperature=0.0, top_p=1.0, top_k=0, seed=None, stop=None) | kw
    return settings_problems(**args, vocab=VOCAB)


# --- prompts -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("prompt, ok", [
    ([0], True), ([VOCAB - 1], True), ([VOCAB], False), ([-1], False),
    (torch.tensor([0, VOCAB - 1]), True), (torch.tensor([VOCAB]), False),
])
def test_ids_are_inside_the_vocabulary_to_the_last_one(model, prompt, ok):
    found = problems(model, prompt)
    assert (found == []) == ok, found
    if not ok:
        assert found == [f"prompt: it holds ids outside the model's vocabulary 0..{VOCAB - 1}: {[int(prompt[0])]}"]


@pytest.mark.parametrize("prompt", [
    torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([1, 2], dtype=torch.int16), np.array([1, 2], np.uint16),
    np.array([1, 2], np.int8), (np.int32(1), np.uint8(2)),
])
def test_every_integer_dtype_is_ids(model, prompt):
    assert problems(model, prompt) == []


@pytest.mark.parametrize("prompt, says", [
    (torch.tensor([True, False]), "a tensor of bool"), (torch.tensor([1.0]).bfloat16(), "a tensor of bfloat16"),
    (torch.tensor([1.0]).half(), "a tensor of float16"), (torch.tensor([1j]), "a tensor of complex64"),
    (np.array(["a"]), "an array of <U1"), (np.array([1.5], dtype=object), "an array of object"),
    (np.array([True]), "an array of bool"),
    (np.zeros((1, 2), np.int64),
     "a 2-D array of shape [1, 2]; a prompt is 1-D (pass a list of 1-D prompts for a batch)"),
    (torch.tensor(3), "a 0-D tensor"),
    (SimpleNamespace(ndim=1, tolist=lambda: [1]), "is not a prompt"), ([1, float("nan")], "token 1 is nan (float)"),
    ([1, 1j], "token 1 is 1j (complex)"), ([1, 2.5], "token 1 is 2.5 (float)"),
    (bytearray(b"\x01\x02"), "bytes"), (memoryview(b"\x01\x02"), "bytes"), (b"\x01", "bytes"),
    ({1, 2}, "is not a prompt"), (iter([1, 2]), "is not a prompt"), (True, "is not a prompt"),
])
def test_what_only_looks_like_ids_is_refused(model, prompt, says):
    found = problems(model, prompt)
    assert len(found) == 1 and says in found[0], found


def test_every_prompt_problem_is_listed_up_to_a_bound(model):
    found = problems(model, [0.5] * (MOST + 5))
    assert len(found) == MOST and found[-1].startswith(f"prompt: token {MOST - 1} is 0.5")
    found = problems(model, [1, VOCAB + 1, VOCAB, VOCAB + 1, -2])    # the ids outside, once each, in order
    assert found == [f"prompt: it holds ids outside the model's vocabulary 0..{VOCAB - 1}: [-2, {VOCAB}, {VOCAB + 1}]"]
    found = problems(model, list(range(VOCAB + 49, VOCAB - 1, -1)))  # 50 of them: the message stays short
    assert found == [f"prompt: it holds ids outside the model's vocabulary 0..{VOCAB - 1}: "
                     f"{str(list(range(VOCAB, VOCAB + 6)))[:-1]}, ...]"]


def test_a_batch_is_a_list_of_prompts_and_an_empty_one_is_neither(model):
    forms = ("a str, a list of token ids, a 1-D integer tensor or numpy array, a conversation (a list of {'role', "
             "'content'} messages), or a list of those (a batch)")
    assert problems(model, [[1, 2], 3]) == [f"prompt 1: 3 (int) is not a prompt; a prompt is {forms}"]
    assert problems(model, [1, [2]]) == [f"prompt 0: 1 (int) is not a prompt; a prompt is {forms}"]
    for empty in ([], ()):
        assert problems(model, empty) == ["prompt: an empty list is neither a prompt (no token ids) nor a batch (no "
                                          "prompts)"]
    assert problems(model, [[1], []]) == ["prompt 1: no tokens; a prompt needs at least one"]
    assert problems(model, ((1, 2), (3,))) == []


# --- the target's context ----------------------------------------------------------------------------------------
OVER_BY_ONE = (f": 1 over; shorten it to at most {CONTEXT} tokens, which leaves room for max_new_tokens 1 (the last "
               "new token is never fed)")


def test_the_context_bounds_prompt_plus_new_tokens(model):
    # the last new token is never fed: prompt + max_new_tokens may pass the context by one
    assert problems(model, [1] * (CONTEXT - 1), max_new_tokens=2) == []             # fed: exactly the context
    assert problems(model, [1] * CONTEXT, max_new_tokens=1) == []                   # the whole context, one more
    assert problems(model, [1] * (CONTEXT - 1), max_new_tokens=3) == [
        f"max_new_tokens is 3: with a {CONTEXT - 1}-token prompt it runs past the target's context of {CONTEXT} tokens "
        "(max_position_embeddings); at most 2 new tokens fit (the last one is never fed)"]
    assert problems(model, [1] * CONTEXT, max_new_tokens=2)[0].endswith("at most 1 new token fits (the last one is "
                                                                        "never fed)")
    assert problems(model, [1] * (CONTEXT + 1)) == [f"prompt: {CONTEXT + 1} tokens; the target's context "
                                                    f"(max_position_embeddings) is {CONTEXT}{OVER_BY_ONE}"]
    assert len(problems(model, [[1], [1] * CONTEXT], max_new_tokens=2)) == 1         # the longest prompt counts


def test_max_new_tokens_is_bounded_by_its_limit_and_by_the_context_each_on_its_own(model):
    """Two independent bounds: deleting either check still refuses a huge count before any pool is sized."""
    at, past = limits.NEW_TOKENS, limits.NEW_TOKENS + 1
    assert problems(model, max_new_tokens=at) == [f"max_new_tokens is {at}: with a 2-token prompt it runs past the "
                                                  f"target's context of {CONTEXT} tokens (max_position_embeddings); "
                                                  f"at most {CONTEXT - 1} new tokens fit (the last one is never fed)"]
    assert problems(model, max_new_tokens=past)[0] == f"max_new_tokens is {past}; an integer in 1..{at} is expected"
    assert problems(model, max_new_tokens=past)[1].startswith(f"max_new_tokens is {past}: with a 2-token prompt")


def test_a_config_without_a_context_has_none():
    target = SimpleNamespace(model=SimpleNamespace(embed_tokens=SimpleNamespace(num_embeddings=VOCAB)),
                             dims=SimpleNamespace(config=SimpleNamespace()))
    assert vocab_sizes(SimpleNamespace(target=target, draft=SimpleNamespace())) == (VOCAB, VOCAB, None)


def test_every_prompt_of_a_batch_is_checked(model):
    """One problem per bad prompt: an empty prompt does not hide the ones after it."""
    assert problems(model, [[], [VOCAB], [1]]) == [
        "prompt 0: no tokens; a prompt needs at least one",
        f"prompt 1: it holds ids outside the model's vocabulary 0..{VOCAB - 1}: [{VOCAB}]"]


def test_override_problems_read_like_spec_problems(model):
    """The field's own name, the value and what is allowed, for each override at once."""
    assert problems(model, topk=0, steps="x") == ["topk: 0 is not allowed\n      allowed: an integer >= 1",
                                                  "steps: 'x' is not allowed\n      allowed: an integer"]


@pytest.mark.parametrize("declared, context", [(64, 64), (1, 1), (0, None), (-5, None), (None, None), (True, None),
                                               ("64", None), (64.0, None)])
def test_the_context_is_a_positive_integer_the_config_declares(declared, context):
    config = SimpleNamespace(max_position_embeddings=declared)
    target = SimpleNamespace(model=SimpleNamespace(embed_tokens=SimpleNamespace(num_embeddings=VOCAB)),
                             dims=SimpleNamespace(config=config))
    assert vocab_sizes(SimpleNamespace(target=target, draft=SimpleNamespace())) == (VOCAB, VOCAB, context)
    draft = SimpleNamespace(d2t=torch.zeros(6, dtype=torch.long))
    assert vocab_sizes(SimpleNamespace(target=target, draft=draft))[1] == 6


# --- sampling settings -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, ok, bad", [
    ("max_new_tokens", [1, 2, limits.NEW_TOKENS, np.int64(3)], [0, -1, limits.NEW_TOKENS + 1, True, 2.0, None, "2"]),
    ("temperature", [0, 0.0, 1e-9, 2.0 ** -126, 2, 1e30, float(np.finfo(np.float32).max), np.float32(0.5)],
     [-1e-9, -1, float("inf"), float("-inf"), float("nan"), True, False, None, "0.5", 1j, 2.0 ** -126 * 0.99,
      1e-46, 5e-324, float(np.finfo(np.float32).max) * (1 + 2 ** -52), 3.5e38, 1e300]),
    ("top_p", [1, 1.0, 1e-300, 0.5, np.float64(0.3)], [0, 0.0, -0.1, 1 + 1e-9, 2, True, float("nan"), None]),
    ("top_k", [0, 1, VOCAB - 1, VOCAB, np.int64(2)], [-1, VOCAB + 1, True, 1.0, None]),
    ("seed", [None, 0, SEED_RANGE[0], SEED_RANGE[1], -1, np.int64(5)],
     [SEED_RANGE[0] - 1, SEED_RANGE[1] + 1, True, 1.0, "1"]),
    ("stop", [None, [], [0], [VOCAB - 1], (2, 3), {4}, range(3), np.array([1, 2]), torch.tensor([1, 2]),
              torch.tensor([], dtype=torch.long), np.array([VOCAB - 1], dtype=np.uint8)],
     [[-1], [1.5], [True], ["1"], "1", b"\x01", 5, 1.5, [None], [VOCAB], torch.tensor(5), torch.tensor([[1]]),
      torch.tensor([1.0]), np.array(3), torch.tensor([True]), torch.tensor([VOCAB]), torch.tensor([-1])]),
])
def test_each_setting_at_its_bounds(field, ok, bad):
    for v in ok:
        assert settings(**{field: v}) == [], (field, v)
    for v in bad:
        found = settings(**{field: v})
        assert len(found) == 1 and found[0].startswith(f"{field} "), (field, v, found)



@pytest.mark.parametrize("field, bad", [("max_new_tokens", 0), ("temperature", -1.0), ("top_p", 0.0),
                                        ("top_k", VOCAB + 1), ("seed", SEED_RANGE[1] + 1), ("stop", [-1])])
def test_generate_baseline_checks_each_setting_as_generate_does(model, field, bad):
    """The reference path hands every setting to the same checks (one dropped from its check_call runs unchecked)."""
    found = []
    for call in (model.generate, model.generate_baseline):
        with pytest.raises(ArgumentError) as r:
            call([1, 2], **{"max_new_tokens": 1, field: bad})
        found.append(r.value.problems)
    assert found[0] == found[1] and len(found[0]) == 1 and found[0][0].startswith(f"{field} ")

def test_the_seed_bounds_are_what_torch_accepts(model):
    for seed in SEED_RANGE:
        assert len(model.generate([1, 2], max_new_tokens=2, temperature=1.0, seed=seed).token_ids) <= 2
        with pytest.raises((RuntimeError, ValueError)):   # one past either end
            torch.Generator().manual_seed(seed + (1 if seed > 0 else -1))


def test_stop_ids_are_used_as_given(model):
    out = model.generate_baseline([1, 2], max_new_tokens=8, stop=[])
    first = out.token_ids[0]
    assert model.generate([1, 2], max_new_tokens=8, stop=[first]).token_ids == [first]
    assert model.generate([1, 2], max_new_tokens=8, stop=np.array([first])).token_ids == [first]


# --- decoding overrides ------------------------------------------------------------------------------------------
def test_topk_up_to_the_draft_vocabulary(tiny_pair, tmp_path):
    from draftsmith.testing import write_eagle3

    small = draftsmith.assemble("eagle3-llama", target=tiny_pair[0],
                                draft=write_eagle3(tmp_path / "d", tiny_pair[0], draft_vocab=6))
    assert small.plan(topk=6).topk == 6
    assert len(small.generate([1, 2], max_new_tokens=2, topk=6).token_ids) == 2
    for call in (lambda: small.plan(topk=7), lambda: small.generate([1, 2], max_new_tokens=2, topk=7)):
        with refused(kind=ArgumentError) as r:
            call()
        assert r.value.problems == ["topk: 7 candidates per node, but the draft's vocabulary has 6 tokens"]


@pytest.mark.parametrize("overrides, ok", [
    (dict(topk=1), True), (dict(topk=0), False), (dict(steps=1, topk=1), True), (dict(steps=0), False),
    (dict(draft_tokens=2), True), (dict(draft_tokens=1), False),
    (dict(topk=4, steps=5, draft_tokens=69), True), (dict(topk=4, steps=5, draft_tokens=70), False),
    (dict(topk=2, steps=1, draft_tokens=3), True), (dict(topk=2, steps=1, draft_tokens=4), False),
    (dict(topk=1, steps=3, draft_tokens=1000), True), (dict(topk=1, steps=3, draft_tokens=limits.DRAFT_TOKENS + 1),
                                                       False),
    (dict(mode="v2"), True), (dict(mode="v1"), True), (dict(mode="auto"), True), (dict(mode="V2"), False),
    (dict(topk=1, mode="v2"), False), (dict(topk=1, mode="v1"), True), (dict(steps=limits.STEPS), True),
    (dict(steps=limits.STEPS + 1), False), (dict(topk=True), False), (dict(steps="5"), False),
    (dict(draft_tokens=8.0), False), (dict(topk=np.int64(2)), True),
])
def test_decoding_overrides_at_their_bounds(model, overrides, ok):
    """The spec's bounds (draftsmith/limits.py) and cross-field rules (at most topk + (steps-1)*topk^2 + 1 tokens;
    v2 needs a tree), the same from generate() and from plan(); a chain's draft_tokens is never refused by a
    cross-field rule."""
    found = problems(model, **overrides)
    assert (found == []) == ok, found
    if ok:
        plan = model.plan(**overrides)
        assert plan.topk > 1 or plan.draft_tokens == plan.steps + 1
    else:
        with refused(kind=ArgumentError) as r:
            model.plan(**overrides)
        assert r.value.problems == found and len(found) == 1


@pytest.mark.parametrize("steps", [1, 3, limits.STEPS])
def test_a_chains_draft_tokens_become_steps_plus_1_whatever_was_asked(steps):
    """overridden()'s own rule: for topk 1 draft_tokens does not apply; the chain holds the root and ``steps``
    drafts."""
    for asked in (None, 2, limits.DRAFT_TOKENS):
        found = []
        fields = overridden(Decoding(), dict(topk=1, steps=steps, draft_tokens=asked), found, draft_vocab=VOCAB)
        assert found == [] and (fields["topk"], fields["steps"], fields["draft_tokens"]) == (1, steps, steps + 1)
    tree = overridden(Decoding(), dict(topk=2, steps=2, draft_tokens=5), [], draft_vocab=VOCAB)
    assert tree["draft_tokens"] == 5   # a tree keeps what was asked


def test_check_call_defaults_are_generates(model):
    """check_call (also used by bench and doctor) checks a call that leaves a setting out as generate() runs it."""
    ours = inspect.signature(check_call).parameters
    for call in (model.generate, model.generate_baseline):
        for name, p in inspect.signature(call).parameters.items():
            if name in ours and p.default is not inspect.Parameter.empty:
                assert ours[name].default == p.default, (call.__name__, name)


# --- sizes: refused by their size, before each item is looked at ---------------------------------------------------

class _Tokens(list):
    """A prompt whose tokens may not be looked at: only its length, and its first item (which tells an id list
    from a conversation, whose length is checked once rendered)."""

    def __iter__(self):
        yield list.__getitem__(self, 0)
        raise AssertionError("a token past the first was read")

    def __getitem__(self, i):
        raise AssertionError("a token was read")


def test_a_prompt_past_the_context_is_refused_by_its_length_alone(model):
    prompt = _Tokens([0] * (CONTEXT + 1))
    assert problems(model, [prompt]) == [f"prompt 0: {CONTEXT + 1} tokens; the target's context "
                                         f"(max_position_embeddings) is {CONTEXT}{OVER_BY_ONE}"]
    assert problems(model, torch.zeros(CONTEXT + 1, dtype=torch.long))[0].startswith(f"prompt: {CONTEXT + 1} tokens")
    assert problems(model, [0.5] * (CONTEXT + 1)) == [f"prompt: {CONTEXT + 1} tokens; the target's context "
                                                      f"(max_position_embeddings) is {CONTEXT}{OVER_BY_ONE}"]
    assert problems(model, [1] * CONTEXT, max_new_tokens=2) == [
        f"max_new_tokens is 2: with a {CONTEXT}-token prompt it runs past the target's context of {CONTEXT} tokens "
        "(max_position_embeddings); at most 1 new token fits (the last one is never fed)"]   # its tokens are read


def test_a_batch_past_the_bound_is_refused_by_its_size_alone(model, monkeypatch):
    monkeypatch.setattr(limits, "BATCH", 3)
    bad = _Tokens([0.5])
    assert problems(model, [bad] * 4) == ["prompt: a batch of 4 prompts; at most 3 in one call"]
    assert len(problems(model, [[0.5]] * 3)) == 3                    # the bound itself: each prompt is checked


def test_more_stop_ids_than_tokens_are_refused_by_their_count():
    said = f"stop holds more than {VOCAB} ids; the vocabulary has {VOCAB} tokens"
    assert settings(stop=list(range(VOCAB + 1))) == [said]
    assert settings(stop=[2, VOCAB, VOCAB + 7]) == [f"stop holds ids outside the model's vocabulary 0..{VOCAB - 1}: "
                                                     f"[{VOCAB}, {VOCAB + 7}]"]
    assert settings(stop=[VOCAB - 1]) == []
    assert settings(stop=list(range(VOCAB))) == []


@pytest.mark.parametrize("kw, says", [({"topk": 10**5000}, "topk: '<an integer of about 5001 digits>'"),
                                      ({"steps": -10**5000}, "steps: '<an integer of about 5001 digits>'"),
                                      ({"temperature": 10**400}, "temperature is <an integer of about 401 digits>"),
                                      ({"seed": 10**5000}, "seed is <an integer of about 5001 digits>"),
                                      ({"max_new_tokens": 10**5000}, "max_new_tokens is <an integer of about")])
def test_integers_python_will_not_print_are_refused_by_name(model, kw, says):
    found = problems(model, **kw)
    assert found and found[0].startswith(says), found   # (max_new_tokens also runs past the context)


def test_an_argument_error_shows_a_bounded_number_of_problems():
    from draftsmith.errors import SHOWN
    e = ArgumentError("generate()", [f"problem {i}" for i in range(SHOWN + 7)])
    assert len(e.problems) == SHOWN + 7 and str(e).endswith(f"problem {SHOWN - 1}\n  ... and 7 more")
    assert str(ArgumentError("generate()", ["a"] * SHOWN)).count("\n") == SHOWN


def test_a_text_prompt_with_a_lone_surrogate_is_refused_by_place(model):
    assert problems(model, "ab\ud800c") == ["prompt: a lone surrogate at character 2; a prompt is Unicode text"]


@pytest.mark.parametrize("call", ["generate", "generate_baseline"])
@pytest.mark.parametrize("stop", [lambda: range(10**8), lambda: (i for i in range(10**7)),
                                  lambda: itertools.islice(itertools.count(), 10**8),   # bounded: a regression fails
                                  lambda: torch.arange(3 * 10**7), lambda: np.arange(3 * 10**7)],
                         ids=["range", "generator", "endless", "tensor", "array"])
def test_a_stop_list_longer_than_the_vocabulary_is_refused_unread(model, call, stop):
    """A sized stop is refused by its length, an iterator after one id past the vocabulary: a range(10**8) was
    listed whole first (seconds), itertools.count() until memory ran out."""
    with refused(kind=ArgumentError) as r:
        getattr(model, call)([1, 2], max_new_tokens=1, stop=stop())
    assert r.value.problems == [f"stop holds more than {VOCAB} ids; the vocabulary has {VOCAB} tokens"]
