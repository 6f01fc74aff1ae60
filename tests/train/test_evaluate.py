"""Held-out acceptance (draftsmith/train/evaluate.py): the engine's Stats pooled over prompts, checked on small cases
computed by hand: tau = committed / steps, rate[i] = share of steps that accepted at least i+1 draft tokens."""
import re
from types import SimpleNamespace

import pytest

from draftsmith.decoding.stats import Stats
from draftsmith.train.evaluate import PLANS, Acceptance, acceptance


def stats(steps: int, committed: int, per_position: list[int]) -> Stats:
    return Stats(steps=steps, committed=committed, accepted_per_position=list(per_position))


def test_an_empty_pool_has_tau_1_and_no_rates():
    """No verification step yet: one token per step (target-only), and no position to report."""
    acc = Acceptance()
    assert acc.tau == 1.0 and acc.rate == [] and acc.same_as_target is True
    assert acc.line() == "tau 1.00  accepted per position "


def test_stats_are_pooled_over_prompts_position_by_position():
    # prompt 1: 4 steps committing 10 tokens; 3 steps accepted >= 1 draft, 2 accepted >= 2, 1 accepted >= 3
    # prompt 2: 2 steps committing 3 tokens; 1 step accepted 1 draft (a shorter per-position list)
    acc = Acceptance()
    acc.add(stats(4, 10, [3, 2, 1]))
    acc.add(stats(2, 3, [1]))
    assert (acc.steps, acc.committed, acc.accepted) == (6, 13, [4, 2, 1])
    assert acc.tau == pytest.approx(13 / 6)
    assert acc.rate == pytest.approx([4 / 6, 2 / 6, 1 / 6])
    assert acc.line() == "tau 2.17  accepted per position 0.67 0.33 0.17"


def test_a_longer_list_later_extends_the_pool_with_zeros_first():
    acc = Acceptance()
    acc.add(stats(1, 2, [1]))
    acc.add(stats(3, 9, [3, 3, 2]))
    assert acc.accepted == [4, 3, 2]
    assert acc.rate == pytest.approx([1.0, 0.75, 0.5])


class FakeModel:
    """generate() returns fixed Stats per prompt; generate_baseline() agrees with it except on ``differs``."""

    def __init__(self, per_prompt: dict[tuple, Stats], differs: tuple = ()):
        self.per_prompt, self.differs, self.calls = per_prompt, differs, []

    def generate(self, prompt, **kw):
        self.calls.append(("generate", prompt, kw))
        return SimpleNamespace(stats=self.per_prompt[tuple(prompt)], token_ids=[7, 8])

    def generate_baseline(self, prompt, **kw):
        self.calls.append(("baseline", prompt, kw))
        return SimpleNamespace(token_ids=[7, 9] if tuple(prompt) == self.differs else [7, 8])


def test_acceptance_decodes_every_prompt_greedily_with_the_plan():
    model = FakeModel({(1, 2): stats(2, 5, [2, 1]), (3,): stats(1, 1, [])})
    acc = acceptance(model, [(1, 2), [3]], max_new_tokens=5, topk=1, steps=3)
    assert (acc.steps, acc.committed, acc.accepted) == (3, 6, [2, 1])
    assert model.calls == [("generate", [1, 2], dict(max_new_tokens=5, temperature=0.0, topk=1, steps=3)),
                           ("generate", [3], dict(max_new_tokens=5, temperature=0.0, topk=1, steps=3))]
    assert acc.same_as_target is True   # not checked: no baseline decoded


@pytest.mark.parametrize("differs, same", [((), True), ((1, 2), False), ((3,), False)])
def test_check_compares_every_output_with_target_only(differs, same):
    model = FakeModel({(1, 2): stats(1, 1, []), (3,): stats(1, 1, [])}, differs=differs)
    acc = acceptance(model, [[1, 2], [3]], max_new_tokens=4, check=True)
    assert acc.same_as_target is same
    assert [c[:2] for c in model.calls if c[0] == "baseline"] == [("baseline", [1, 2]), ("baseline", [3])]
    assert all(c[2] == {"max_new_tokens": 4} for c in model.calls if c[0] == "baseline")


def test_each_plan_is_what_its_name_says():
    """The names are what the evaluation prints: 'tree topk 4, 6 levels, 17 nodes' must decode with those numbers."""
    assert list(PLANS)[0].startswith("tree")   # the tree first
    for name, plan in PLANS.items():
        if name.startswith("tree"):
            topk, steps, nodes = map(int, re.fullmatch(r"tree topk (\d+), (\d+) levels, (\d+) nodes", name).groups())
            assert plan == dict(topk=topk, steps=steps, draft_tokens=nodes)
        elif name.startswith("chain"):
            assert plan == dict(topk=1, steps=int(name.split()[1]))
        else:
            assert name == "spec default" and plan == {}


def test_acceptance_decodes_as_many_tokens_as_generate_by_default():
    import inspect

    from draftsmith.decoding.model import SpeculativeModel

    model = FakeModel({(1,): stats(1, 1, [])})
    acceptance(model, [[1]])
    default = inspect.signature(SpeculativeModel.generate).parameters["max_new_tokens"].default
    assert model.calls[0][2]["max_new_tokens"] == default
