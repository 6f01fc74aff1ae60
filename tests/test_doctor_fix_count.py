"""doctor says how many readings it tried whatever it found (README: with --search "it says how many were and
whether one does better"): with a fix as without one, at a fine tau as at a low one, however many were tried
(only the rows past 12 were counted where a reading did better)."""
import pytest
from typer.testing import CliRunner

import draftsmith
import draftsmith.doctor as doctor
from draftsmith.cli import app
from draftsmith.doctor import Candidate, Diagnosis, Measure


def m(tau):
    return Measure(tau, [0.9, 0.8, 0.7, 0.6, 0.5], 10, None)


def said(dx) -> tuple[int, str]:
    """doctor's exit code and output (on one line) for the diagnosis ``dx``."""
    mp = pytest.MonkeyPatch()
    mp.setattr(doctor, "diagnose", lambda *a, **k: dx)
    try:
        res = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--search"], env={"COLUMNS": "1000"})
    finally:
        mp.undo()
    return res.exit_code, " ".join(res.output.split())


@pytest.mark.parametrize("n", [3, 14])
@pytest.mark.parametrize("low", [False, True])
def test_the_count_of_readings_tried_is_said_with_a_fix_too(n, low):
    spec = draftsmith.load_spec("demo")
    fix = Candidate((("draft.feed_back", "post_norm"),), m(4.0))
    others = [Candidate(((f"draft.x{i}", i),), m(1.0)) for i in range(n - 2)] + [
        Candidate((("draft.y", 0),), error="E")]
    code, out = said(Diagnosis(spec, Candidate((), m(1.2 if low else 3.0)), [fix, *others], fix, low=low))
    assert code == int(low), out
    if low:
        assert f"fix ({n} tried, {n - 1} loaded, 0.0 s): draft.feed_back = post_norm (tau 4.00); in the spec:" in out
    else:
        assert (f"but a different reading does better ({n} tried): draft.feed_back = post_norm (tau 4.00); in the "
                "spec:") in out
    assert ("more readings tried, none better" in out) == (n > 12)
    # as where none does better
    code, out = said(Diagnosis(spec, Candidate((), m(1.2 if low else 3.0)), others, low=low))
    assert (f"no reading tried does better ({n - 1} tried, {n - 2} loaded, 0.0 s)" if low
            else f"no other reading does better ({n - 1} tried)") in out
