"""Mutation survivors of decoding/prompts.py, values.py, decoding/model.py and chat.py (round 6): each test
names the mutants it catches. Host-side checks on a fake tokenizer and the toy demo pair: no GPU, no network."""
import pytest

from draftsmith import limits
from draftsmith.chat import template_problem, written_size
from draftsmith.decoding.arguments import settings_problems
from draftsmith.decoding.prompts import encode_prompts
from draftsmith.testing import LastMessageTokenizer


def problems_of(prompt, tokenizer=None, vocab=32, context=None):
    out: list[str] = []
    ids, _ = encode_prompts(prompt, tokenizer=tokenizer, vocab=vocab, context=context, problems=out)
    return ids, out


# --- prompts.py -------------------------------------------------------------------------------------------------
def test_at_most_eight_problems_are_listed_per_prompt():
    # catches prompts.py:23 MOST = 8 -> 9 / 7 (the bad tokens of one prompt, and a conversation's bad messages)
    _, said = problems_of([1.5] * 12)
    assert said == [f"prompt: token {i} is 1.5 (float); token ids are integers" for i in range(8)]
    _, said = problems_of([{"role": "user"}] * 12, LastMessageTokenizer())
    assert said == [f"prompt: message {i}'s content is missing; it must be text" for i in range(8)]


def test_a_conversation_of_exactly_the_most_messages_is_read_not_refused_by_its_length():
    # catches prompts.py:82 len(p) > MESSAGES -> >= : 2**16 messages are read (and then refused for the values
    # they hold, 5 each), 2**16 + 1 are refused by their count before a message is read
    one = {"role": "user", "content": "x"}
    _, said = problems_of([one] * limits.MESSAGES, LastMessageTokenizer())
    assert len(said) == 1 and said[0].startswith(f"prompt: a conversation that holds more than "
                                                 f"{limits.MESSAGE_VALUES} values")
    _, said = problems_of([one] * (limits.MESSAGES + 1), LastMessageTokenizer())
    assert said == [(f"prompt: a conversation of {limits.MESSAGES + 1} messages; at most {limits.MESSAGES} are read "
                     "(its tokens must also fit the target's context once rendered)")]


def test_a_conversation_of_exactly_the_most_values_decodes():
    # catches prompts.py:89 size > MESSAGE_VALUES -> >= : the list, the message, its 3 keys, 2 strings, and a list
    # of n strings (1 + n) are 8 + n values; n = MESSAGE_VALUES - 8 is at the bound and passes, one more is refused
    n = limits.MESSAGE_VALUES - 8
    talk = [{"role": "user", "content": "abc", "extra": ["v"] * n}]
    assert written_size(talk, limits.MESSAGE_VALUES) == limits.MESSAGE_VALUES
    ids, said = problems_of(talk, LastMessageTokenizer())
    assert (ids, said) == ([[1, 2, 3]], [])
    ids, said = problems_of([{**talk[0], "extra": ["v"] * (n + 1)}], LastMessageTokenizer())
    assert ids == [] and len(said) == 1 and f"holds more than {limits.MESSAGE_VALUES} values" in said[0]


# --- values.py --------------------------------------------------------------------------------------------------
def test_an_integer_past_floats_range_is_no_finite_temperature():
    # catches values.py:21 is_finite's OverflowError -> True (10**400 would then be read as a huge temperature)
    from draftsmith.values import is_finite

    assert is_finite(10 ** 400) is False and is_finite(10 ** 300) is True
    assert settings_problems(4, 10 ** 400, 1.0, 0, None, None, vocab=32) == [
        "temperature is <an integer of about 401 digits>; a finite number >= 0 is expected (0 = greedy)"]


# --- chat.py ----------------------------------------------------------------------------------------------------
def test_a_string_is_one_written_value():
    # catches chat.py:97 written_size's leaf count 1 -> 2 / 0 (a str at the top: a number there raises TypeError,
    # reported, not pinned here)
    assert written_size("x", 10) == 1
    assert written_size("long text", 3) == 1
    assert written_size(["x", 3, None], 10) == 4


def test_a_folder_path_of_exactly_300_characters_is_said_whole():
    # catches chat.py:115 short_text(folder, 300) -> 299: a path of 300 characters is kept whole, 301 are cut
    class NoTemplate:
        chat_template = None

    path = "/" + "x" * 299
    assert f" in {path} has no chat template" in template_problem(NoTemplate(), path)
    longer = path + "y"
    assert f" in {longer[:148]}...{longer[-148:]} has" in template_problem(NoTemplate(), longer)


# --- model.py ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo():
    import draftsmith

    return draftsmith.assemble("demo")


def test_the_runner_cache_and_lock_are_neither_shown_nor_compared(demo):
    # catches model.py:46 / :49 field(repr=False / compare=False) -> True: a model's repr does not dump its cached
    # runners or lock, and two models differing only in them are equal
    import dataclasses
    import threading

    demo._runners([[1, 2]], 4)
    assert demo._runners_cache and "_runners_cache" not in repr(demo) and "_lock" not in repr(demo)
    other = dataclasses.replace(demo)   # its own (empty) cache and lock: not given to __init__
    assert other == demo and not other._runners_cache and isinstance(other._lock, type(threading.Lock()))
    assert other._lock is not demo._lock


def test_a_two_wide_tree_on_a_recurrent_target_is_a_chain(demo):
    # catches model.py:109 topk > 1 -> > 2 (topk 2 is a tree, so recurrence rules it out) and -> > 0 (a chain asked
    # for is a chain because topk is 1; recurrence is not its reason)
    import dataclasses

    from draftsmith.decoding.modes import RECURRENT

    recurrent = dataclasses.replace(demo, recurrent=True)
    assert recurrent.plan(topk=1, steps=3).reason == "auto chose v1 (chain): topk is 1"
    plan = recurrent.plan(topk=2, steps=3, draft_tokens=4)
    assert (plan.mode, plan.topk, plan.draft_tokens) == ("v1", 1, 4)
    assert plan.reason == f"auto chose v1 (chain): {RECURRENT}"
    assert demo.plan(topk=2, steps=3, draft_tokens=4).mode == "v2"


def test_a_model_built_directly_is_not_recurrent_by_default(demo):
    # catches model.py:41 recurrent: bool = False -> True (a model built without it plans trees)
    from draftsmith.decoding.model import SpeculativeModel

    built = SpeculativeModel(demo.target, demo.draft, demo.spec, demo.tokenizer, demo.stop_ids)
    assert built.recurrent is False and built.plan(topk=2, steps=3, draft_tokens=4).mode == "v2"


def test_the_default_call_decodes_64_tokens_unfiltered(demo):
    # catches model.py:52 / :87 max_new_tokens=64 -> 65 / 63 and :53 / :88 top_k=0 -> 1 (the defaults of generate
    # and generate_baseline; top_k 1 would make every sampled call greedy)
    for call in (demo.generate, demo.generate_baseline):
        assert len(call("hello", stop=[]).token_ids) == 64
        sampled = call("hello", 16, 1.0, seed=0).token_ids
        assert sampled == call("hello", 16, 1.0, seed=0, top_k=0).token_ids
        assert sampled != call("hello", 16, 1.0, seed=0, top_k=1).token_ids


def test_the_text_of_an_output_drops_special_tokens(demo):
    # catches model.py:157 decode(skip_special_tokens=True) -> False: an emitted stop id (kept in token_ids) is not
    # written into the text
    from types import SimpleNamespace

    bos, eos = demo.tokenizer.all_special_ids
    ids = [bos] + demo.tokenizer.encode("hi", add_special_tokens=False) + [eos]
    out = demo._outputs([SimpleNamespace(out=ids)], None, True)
    assert (out.token_ids, out.text) == (ids, "hi")


@pytest.mark.parametrize("leaf", ["x", "a long string", 3, 2.5, None, True])
def test_a_top_level_leaf_is_one_written_value(leaf):
    # written_size walked a string character by character and raised on any other leaf (round 6's bug)
    assert written_size(leaf, 10) == 1
