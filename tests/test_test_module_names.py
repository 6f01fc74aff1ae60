"""Test modules have distinct basenames: tests/ has no __init__.py, so pytest imports each by its basename from
rootdir, and a second module of the same name fails the whole collection ("import file mismatch"), which only a
clean clone shows (a warm checkout's __pycache__ may hide it)."""
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent


def test_every_test_module_has_a_basename_of_its_own():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
