"""Kills for cli/doctor.py survivors (round 22c): the bar doctor says it judged by is explained only where it is
the default for a short chain (no --min-tau, not 2.0); an asked bar and the plain default 2.0 are said bare."""
from types import SimpleNamespace

import pytest

from draftsmith.cli.doctor import _bar


def diagnosis(bar: float, steps: int) -> SimpleNamespace:
    return SimpleNamespace(min_tau=bar, spec=SimpleNamespace(decoding=SimpleNamespace(steps=steps)))


def test_a_short_chains_default_bar_says_why():
    assert _bar(diagnosis(1.5, 1), None) == ("1.5 (the default bar for the spec's 1-step chain, half its reach: "
                                             "1 + steps / 2)")


@pytest.mark.parametrize("bar, steps, asked", [(1.5, 1, 1.5), (2.0, 5, None), (2.0, 1, 2.0), (3.0, 5, 3.0)])
def test_an_asked_bar_or_the_plain_default_is_said_bare(bar, steps, asked):
    assert _bar(diagnosis(bar, steps), asked) == str(bar)
