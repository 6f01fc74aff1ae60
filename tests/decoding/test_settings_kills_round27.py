"""Round 27 on decoding/settings.py: every mutant was killed already (65 of 65); these pin the bounds a refusal of a
temperature names, which no mutant reaches (a format spec is no mutation site): the number the message gives is one
the check accepts, so a caller who retries with it is not refused again."""
import re

import pytest

from draftsmith.decoding import settings


def refusal(temperature):
    return settings.number_problems(4, temperature, 1.0, 0, None, vocab=10)


@pytest.mark.parametrize("temperature, bound", [(settings.TINY_TEMPERATURE / 2, "least"), (3.5e38, "most"),
                                                (1e300, "most")])
def test_the_bound_a_temperature_refusal_names_is_accepted(temperature, bound):
    """'must be at least X' / 'at most X': X is within float32's smallest normal and largest numbers, and accepted
    (3.403e+38, the .4g of 3.4028234663852886e+38 rounded up, was refused in its turn: 'temperature is 3.403e+38; a
    temperature must be at most 3.403e+38')."""
    said = refusal(temperature)
    assert len(said) == 1 and f"must be at {bound}" in said[0], said
    x = float(re.search(rf"at {bound} (\S+)", said[0]).group(1))
    assert settings.TINY_TEMPERATURE <= x <= settings.HUGE_TEMPERATURE and refusal(x) == [], (x, refusal(x))
