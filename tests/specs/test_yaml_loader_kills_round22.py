"""Kills for specs/yaml_loader.py survivors (round 22): repeated_keys walks each node once (a sequence that holds
itself through an alias does not loop) and says the repeats in file order, by the repeated key's line."""
from __future__ import annotations

import signal

import pytest

from draftsmith.errors import SpecError
from draftsmith.specs.documents import load_yaml_text
from draftsmith.specs.yaml_loader import SpecLoader, repeated_keys


@pytest.fixture
def within_10_seconds():
    def stop(*_):
        raise TimeoutError("still running after 10 s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 10)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


def test_a_repeat_beside_a_sequence_that_holds_itself_is_said_once_and_quickly(within_10_seconds):
    """``&s [..., *s]`` reaches the sequence again from inside itself: the walk that names the repeat's path skips a
    node it has seen (walking it again re-queued its items without end), and says the repeat at its first path."""
    with pytest.raises(SpecError) as info:
        load_yaml_text("a: &s [{x: 1, x: 2}, *s]\n", "s.yaml")
    [p] = info.value.problems
    assert (p.path, p.line) == ("a.0.x", 1)
    assert p.message.startswith("the key appears twice in one mapping (first at line 1)")


def repeats(text: str) -> list[tuple[str, int, int]]:
    loader = SpecLoader(text)
    try:
        loader.get_single_data()
    finally:
        loader.dispose()
    return repeated_keys(loader)


def test_repeated_keys_come_in_file_order_by_the_repeats_line():
    """The root's repeat (``c``, line 3, first at line 1) is found before the nested one (``z.x``, line 2, first at
    line 2): repeated_keys sorts by the repeated key's line, not by where its first copy is nor by path (both put
    ``c`` first)."""
    assert repeats("c: 1\nz: {x: 1, x: 2}\nc: 2\n") == [("z.x", 2, 2), ("c", 3, 1)]


def test_a_repeat_in_an_anchored_mapping_is_said_where_the_anchor_writes_it():
    """`defaults: &d {lr: 1, lr: 2}` then `train: *d`: the repeat is said at defaults.lr, where it is written (the
    walk reached the alias first and said train.lr; a helper's finding, 2026-12-01); in a list, at its first item."""
    from draftsmith.errors import SpecError
    from draftsmith.specs.documents import load_yaml_text

    for text, path in (("defaults: &d {lr: 1, lr: 2}\ntrain: *d\n", "defaults.lr"),
                       ("a: [&d {x: 1, x: 2}, *d, *d]\n", "a.0.x"),
                       ("z: 1\nb: {c: &d {k: 1, k: 2}}\na: *d\n", "b.c.k")):
        with pytest.raises(SpecError) as info:
            load_yaml_text(text, "s.yaml")
        assert [p.path for p in info.value.problems] == [path], text
