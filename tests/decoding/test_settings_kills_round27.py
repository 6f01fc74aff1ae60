"""Round 27 on decoding/settings.py: every mutant was killed already (65 of 65); these pin the bounds a refusal of a
temperature names, which no mutant reaches (a format spec is no mutation site): the number the message gives is one
the check accepts, so a caller who retries with it is not refused again."""
import re

import pytest

from draftsmith.decoding import settings


def refusal(temperature):
    return settings.number_problems(4, temperature, 1.0, 0, None, vocab=10)


def test_the_least_temperature_a_refusal_names_is_accepted():
    """'must be at least 1.18e-38': 1.18e-38 is at least float32's smallest normal number, and accepted."""
    said = refusal(settings.TINY_TEMPERATURE / 2)
    bound = float(re.search(r"at least (\S+)", said[0]).group(1))
    assert bound >= settings.TINY_TEMPERATURE and refusal(bound) == []


@pytest.mark.parametrize("temperature", [3.5e38, 1e300])
def test_the_most_temperature_a_refusal_names_is_accepted(temperature):
    """'must be at most X': X is at most float32's largest number, and accepted (3.403e+38, the .4g of
    3.4028234663852886e+38 rounded up, was refused in its turn: 'temperature is 3.403e+38; a temperature must be at
    most 3.403e+38')."""
    said = refusal(temperature)
    assert len(said) == 1 and "a temperature must be at most" in said[0], said
    bound = float(re.search(r"at most (\S+)", said[0]).group(1))
    assert bound <= settings.HUGE_TEMPERATURE and refusal(bound) == [], (bound, refusal(bound))
