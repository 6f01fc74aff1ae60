"""generate_baseline() checks the draft arguments it ignores as generate() checks them (h83: topk=0, topk='x' and
mode='zz' passed silently), so one dict of keywords serves both calls and a bad one is said by either."""
import pytest

import draftsmith
from draftsmith.errors import ArgumentError


@pytest.fixture(scope="module")
def demo():
    return draftsmith.assemble("demo")


@pytest.mark.parametrize("bad", [dict(topk=0), dict(topk="x"), dict(mode="zz"), dict(steps=-1)])
def test_a_bad_draft_argument_is_refused_by_both_calls(demo, bad):
    with pytest.raises(ArgumentError, match="generate_baseline\\(\\) draft arguments"):
        demo.generate_baseline([1, 2, 3], max_new_tokens=2, **bad)
    with pytest.raises(ArgumentError):
        demo.generate([1, 2, 3], max_new_tokens=2, **bad)


def test_good_draft_arguments_are_ignored(demo):
    want = demo.generate_baseline([1, 2, 3], max_new_tokens=4, stop=[]).token_ids
    assert demo.generate_baseline([1, 2, 3], max_new_tokens=4, stop=[], topk=1, steps=3, mode="v1").token_ids == want
