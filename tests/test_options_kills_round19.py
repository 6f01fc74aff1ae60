"""Round 19 mutation kills for draftsmith/options.py: --threads' refusal offers 'auto' only where the option takes it
(generate, bench and doctor parse it through parse_threads; train's check_threads takes a count only)."""
import os

import pytest

from draftsmith.errors import OptionError
from draftsmith.options import check_threads, parse_threads


def test_a_bad_thread_count_of_generate_bench_doctor_offers_auto():
    with pytest.raises(OptionError, match=r"allowed an integer in 1\.\.\d+.*, or auto \(the fastest count"):
        parse_threads("0")
    with pytest.raises(OptionError, match="or auto"):
        parse_threads("many")


def test_a_bad_thread_count_where_auto_is_not_taken_does_not_offer_it():
    with pytest.raises(OptionError) as e:
        check_threads(0)
    assert "auto" not in str(e.value) and f"1..{os.cpu_count() or 1}" in str(e.value)
    assert check_threads(1) == 1 and parse_threads("auto") is None
