"""short(): every quoted value in a message is bounded in length and in time, whatever it is."""

import torch
from hypothesis import given
from hypothesis import strategies as st

from draftsmith.errors import Problem, SpecError, short

from hardening_helpers import quick

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
    with quick():
        for v in [shared, "x" * 5_000_000, 10**20_000, b"y" * 5_000_000, torch.zeros(1000, 1000),
                  {i: i for i in range(10**5)}]:
            assert len(short(v)) <= 80


def test_a_spec_error_with_many_problems_and_huge_values_stays_short():
    problems = [Problem(f"draft.x{i}" * 50, "m" * 10_000, found="v" * 10**6, allowed="a" * 10**5, hint="h" * 10**5)
                for i in range(1000)]
    text = str(SpecError("f" * 10_000, problems))
    assert len(text) < 200_000 and text.endswith("... and 940 more")


def test_suggestions_are_only_sought_for_words_of_bounded_length(monkeypatch):
    import difflib

    import draftsmith
    from draftsmith.errors import SUGGEST_CHARS, suggest
    assert suggest("gqb", ["gqa", "mla"]) == " Did you mean 'gqa'?"
    seen = []
    real = difflib.get_close_matches
    monkeypatch.setattr(difflib, "get_close_matches", lambda w, *a, **k: (seen.append(len(w)), real(w, *a, **k))[1])
    assert suggest("g" * (SUGGEST_CHARS + 1), ["gqa"]) == ""
    data = draftsmith.load_spec("eagle3-llama").model_dump(mode="json")
    data["draft"]["attention"]["kind"] = "q" * 2_000_000          # took 0.75 s in difflib
    data["decoding"]["mode"] = "v" * 2_000_000
    try:
        draftsmith.parse_spec(data, source="long.yaml")
    except SpecError as e:
        assert len(str(e)) < 5000 and {p.path for p in e.problems} >= {"draft.attention.kind", "decoding.mode"}
    assert max(seen, default=0) <= SUGGEST_CHARS


def test_a_placeholder_bound_to_a_huge_config_value_quotes_it_short():
    import pytest

    from draftsmith.components.rule_config import bind
    with pytest.raises(ValueError) as info:
        bind("^layers\\.${n}\\.", {"n": list(range(10**5))}, pattern=True)
    assert "${n}" in str(info.value) and len(str(info.value)) < 300
