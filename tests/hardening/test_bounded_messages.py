"""short(): every quoted value in a message is bounded in length and in time, whatever it is."""
import time

import torch
from hypothesis import given
from hypothesis import strategies as st

from draftsmith.errors import short
from draftsmith.errors import Problem, SpecError

ANY = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.binary()),
                   lambda inner: st.one_of(st.lists(inner), st.tuples(inner, inner),
                                           st.dictionaries(st.text(max_size=5), inner)), max_leaves=30)


@given(ANY, st.integers(10, 200))
def test_short_is_bounded_for_any_value(value, limit):
    assert len(short(value, limit)) <= limit


def test_short_is_fast_on_huge_and_shared_values():
    shared = []
    for _ in range(40):
        shared = [shared] * 10      # 10**40 leaves if expanded
    start = time.perf_counter()
    for v in [shared, "x" * 5_000_000, 10**20_000, b"y" * 5_000_000, torch.zeros(1000, 1000), {i: i for i in range(10**5)}]:
        assert len(short(v)) <= 80
    assert time.perf_counter() - start < 1.0


def test_a_spec_error_with_many_problems_and_huge_values_stays_short():
    problems = [Problem(f"draft.x{i}" * 50, "m" * 10_000, found="v" * 10**6, allowed="a" * 10**5, hint="h" * 10**5)
                for i in range(1000)]
    text = str(SpecError("f" * 10_000, problems))
    assert len(text) < 200_000 and text.endswith("... and 940 more")
