"""Round 26c on draftsmith.doctor._first_line (no surviving mutant; pins the rule the round-26 change made): a load
error's next two lines follow its first each after '; ', or after a space where the line before ends with ':'
(a heading and its problems read as one sentence)."""

from draftsmith.doctor import _first_line


def test_lines_after_a_heading_ending_in_a_colon_follow_it_with_a_space():
    """'map:' then its problems: 'map: a; b', not 'map:; a; b' (the third line is cut)."""
    assert _first_line(ValueError("bad map:\n  a is 1\n  b is 2\n  c is 3")) == "ValueError: bad map: a is 1; b is 2"


def test_an_empty_message_is_the_type_name():
    assert _first_line(KeyError()) == "KeyError: KeyError"


def test_blank_lines_are_skipped_not_said_as_empty_parts():
    """A blank line among the first lines gave 'first; ; third' (found by this round's helper)."""
    assert _first_line(ValueError("first\n\n second\nthird\nfourth")) == "ValueError: first; second; third"
    assert _first_line(ValueError("heading:\n\nproblem")) == "ValueError: heading: problem"


def test_a_draftsmith_error_is_said_without_its_class_name():
    """doctor's 'the spec as given does not load: ...' printed 'CheckpointError: <file>: ...' for a target-side
    fault (a bad-input hunt, 2026-12-01); an error of another kind keeps its class's name (what went wrong)."""
    from draftsmith.doctor import _whole
    from draftsmith.errors import CheckpointError

    e = CheckpointError("/t/config.json", "bad")
    e.add_note("note: more")
    assert _first_line(e) == "/t/config.json: bad"
    assert _whole(e) == "/t/config.json: bad\nnote: more"
    assert _whole(ValueError("x")) == "ValueError: x"
