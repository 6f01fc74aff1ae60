"""Mutation round 12 on ``doctor``, its command (draftsmith/cli/doctor.py): the report for a diagnosis given (one
column per draft position, or one shared column past 8, numbered load errors, twelve readings shown and the rest
counted, the readings that do not apply, the verdict lines and exit codes, the table's columns when nothing loaded)
and the command's own options (a bar of zero, --probe files at their limits, notes said, the defaults), each with
diagnose() replaced by a stand-in. How diagnose() searches and measures: test_doctor_kills_round12.py."""
import pytest
import torch
from typer.testing import CliRunner

import draftsmith
import draftsmith.doctor as doctor
from draftsmith import limits
from draftsmith.cli import app
from draftsmith.doctor import Candidate, Diagnosis, Measure


@pytest.fixture(scope="module")
def demo_spec():
    return draftsmith.load_spec("demo")


# --- the command's report, for a diagnosis given -----------------------------------------------------------------

def report(monkeypatch, dx, *args):
    monkeypatch.setattr(doctor, "diagnose", lambda *a, **k: dx)
    return CliRunner().invoke(app, ["doctor", "--spec", "demo", *args])


def m(tau, loss=None, per=(0.9, 0.8, 0.7, 0.6, 0.5)):
    return Measure(tau, list(per), 10, loss)


def row(res, name) -> list[str]:
    """The table row of the reading ``name``, cell by cell."""
    line = next(line for line in res.output.splitlines() if name in line)
    return [cell.strip() for cell in line.split("\u2502")[1:-1]]


def test_fine_pair_one_column_per_draft_position(monkeypatch, demo_spec):
    dx = Diagnosis(demo_spec, Candidate((), m(4.5)), low=False)
    res = report(monkeypatch, dx)
    assert res.exit_code == 0, res.output
    assert "p1..p5" in res.output and "p5" in res.output.split("spec as given")[0]
    assert " p6 " not in res.output and "p0" not in res.output
    assert row(res, "spec as given") == ["spec as given", "4.50", "0.90", "0.80", "0.70", "0.60", "0.50", "-", ""]
    assert "acceptance is fine: tau 4.50 >= 2.0" in res.output
    assert "the other readings were not tried: --search tries them" in res.output


@pytest.mark.parametrize("steps", [8, 9, 16])
def test_a_long_chain_shares_one_position_column_so_the_reading_stays_readable(monkeypatch, demo_spec, steps):
    """Up to 8 draft positions get a column each; a longer chain gets one "p1..pN" column that wraps, so the
    reading's name keeps its width in a 110-column terminal (16 columns of 7 left it none: found by review)."""
    name = "draft.attention.rope = interleaved"
    per = [round(0.9 - 0.05 * i, 2) for i in range(steps)]
    other = Candidate((("draft.attention.rope", "interleaved"),), m(1.0, per=per))
    dx = Diagnosis(demo_spec.with_decoding(steps=steps), Candidate((), m(1.5, per=per)), [other], low=True)
    monkeypatch.setenv("COLUMNS", "110")
    res = report(monkeypatch, dx)
    assert res.exit_code == 1, res.output
    assert max(map(len, res.output.splitlines())) <= 110
    header = next(line for line in res.output.splitlines() if "reading" in line)
    assert len(header.split("\u2503")[1]) >= 20   # the name wraps at most once: at 16 columns it had 2 characters
    assert steps <= 8 or name in res.output
    cells = [cell.strip() for cell in header.split("\u2503")[1:-1]]
    assert cells[2:-2] == ([f"p{i + 1}" for i in range(steps)] if steps <= 8 else [f"p1..p{steps}"])
    shown = " ".join(" ".join(row(res, line)[2:-2]) for line in res.output.splitlines() if "\u2502" in line
                     and row(res, line)[0] in ("spec as given", ""))
    assert shown.split()[:steps] == [f"{a:.2f}" for a in per]


def test_fine_pair_with_a_better_reading_or_none(monkeypatch, demo_spec):
    better = Candidate((("draft.attention.rope", "interleaved"),), m(5.0, 1.0))
    res = report(monkeypatch, Diagnosis(demo_spec, Candidate((), m(4.5)), [better], better, low=False))
    assert res.exit_code == 0 and "but a different reading does better (1 tried): draft.attention.rope = " \
        "interleaved" in res.output, res.output
    assert row(res, "interleaved")[-2:] == ["1.000", "fix"]
    worse = Candidate((("draft.attention.rope", "interleaved"),), m(1.0))
    res = report(monkeypatch, Diagnosis(demo_spec, Candidate((), m(4.5)), [worse, worse], low=False))
    assert res.exit_code == 0 and "no other reading does better (2 tried)" in res.output, res.output


def test_load_errors_are_numbered_once_each(monkeypatch, demo_spec):
    fails = [Candidate(((f"draft.x{i}", i),), error=e) for i, e in enumerate(["E one", "E two", "E one"])]
    dx = Diagnosis(demo_spec, Candidate((), m(1.0)), fails, low=True)
    res = report(monkeypatch, dx)
    assert res.exit_code == 1, res.output
    assert [row(res, f"draft.x{i} = {i}")[-1] for i in range(3)] == [f"does not load ({k})" for k in (1, 2, 1)]
    assert "(1) E one" in res.output and "(2) E two" in res.output and "(3)" not in res.output
    assert "no reading tried does better (3 tried, 0 loaded" in res.output


@pytest.mark.parametrize("n, more", [(12, None), (13, "(1 more readings tried, none better)"),
                                     (14, "(2 more readings tried, none better)")])
def test_twelve_readings_are_shown_and_the_rest_counted(monkeypatch, demo_spec, n, more):
    cands = [Candidate(((f"draft.x{i}", i),), m(1.0)) for i in range(n)]
    res = report(monkeypatch, Diagnosis(demo_spec, Candidate((), m(1.0)), cands, low=True))
    assert res.exit_code == 1, res.output
    assert "draft.x11 = 11" in res.output and "draft.x12 = 12" not in res.output
    assert ("more readings tried" in res.output) == (more is not None) and (more is None or more in res.output)
    assert f"({n} tried, {n} loaded" in res.output


def test_the_readings_that_do_not_apply_are_named(monkeypatch, demo_spec):
    dx = Diagnosis(demo_spec, Candidate((), m(4.5)), low=False, not_applicable=["draft.a", "draft.b"])
    assert "not applicable to this spec's components: draft.a, draft.b" in report(monkeypatch, dx).output
    assert "not applicable" not in report(monkeypatch, Diagnosis(demo_spec, Candidate((), m(4.5)))).output


def test_low_with_a_fix_prints_it_with_the_loss_gain_and_the_yaml(monkeypatch, demo_spec):
    fix = Candidate((("draft.feed_back", "post_norm"),), m(3.0, 1.0))
    res = report(monkeypatch, Diagnosis(demo_spec, Candidate((), m(1.2, 2.0)), [fix], fix, low=True))
    assert res.exit_code == 1, res.output
    assert "acceptance is low: tau 1.20 < 2.0" in res.output
    assert "(tau 3.00, draft loss 1.000 vs 2.000); in the spec:" in " ".join(res.output.split())   # it may wrap
    assert "feed_back: post_norm" in res.output
    for base_loss, fix_loss in ((None, 1.0), (2.0, None)):
        fix = Candidate((("draft.feed_back", "post_norm"),), m(3.0, fix_loss))
        res = report(monkeypatch, Diagnosis(demo_spec, Candidate((), m(1.2, base_loss)), [fix], fix, low=True))
        assert res.exit_code == 1 and "(tau 3.00); in the spec:" in " ".join(res.output.split()), res.output


def test_a_spec_that_does_not_load_but_a_reading_does_is_low_with_the_fix(monkeypatch, demo_spec):
    fix = Candidate((("draft.feed_back", "post_norm"),), m(3.0))
    base = Candidate((), error="ValueError: bad", detail="ValueError: bad\nnote: more")
    res = report(monkeypatch, Diagnosis(demo_spec, base, [fix], fix, low=True))
    assert res.exit_code == 1, res.output
    assert "the spec as given does not load: ValueError: bad" in res.output and "note: more" not in res.output
    assert "fix (1 tried, 1 loaded, 0.0 s): draft.feed_back = post_norm  (tau 3.00)" in res.output


@pytest.mark.parametrize("tried", [0, 2])
def test_a_spec_no_reading_loads_is_bad_input_with_the_whole_error(monkeypatch, demo_spec, tried):
    base = Candidate((), error="ValueError: bad", detail="ValueError: bad\nnote: more")
    fails = [Candidate((("draft.x", i),), error="E") for i in range(tried)]
    res = report(monkeypatch, Diagnosis(demo_spec, base, fails, low=True))
    assert res.exit_code == 2, res.output
    assert "error: the spec as given does not load: ValueError: bad\nnote: more" in res.output
    assert ("none of the 2 other readings tried loads it either" if tried else
            "the other readings were not tried: --search tries them") in res.output


def test_low_without_a_fix_blames_the_draft_and_counts_what_loaded(monkeypatch, demo_spec):
    cands = [Candidate((("draft.x", 1),), m(1.0)), Candidate((("draft.x", 2),), error="E")]
    res = report(monkeypatch, Diagnosis(demo_spec, Candidate((), m(1.0)), cands, low=True))
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "no reading tried does better (2 tried, 1 loaded," in text
    assert "reads this draft as well as any reading tried" in text and "may be for another target" not in text
    res = report(monkeypatch, Diagnosis(demo_spec, Candidate((), m(1.0)), low=True))
    assert res.exit_code == 1 and "not tried (--no-search)" in res.output, res.output


# --- the command's own options -----------------------------------------------------------------------------------

def test_the_command_takes_a_bar_of_zero(monkeypatch, demo_spec):
    seen = {}

    def fake(*a, min_tau, **k):
        seen["min_tau"] = min_tau
        return Diagnosis(demo_spec, Candidate((), m(4.5)), low=False, min_tau=min_tau)

    monkeypatch.setattr(doctor, "diagnose", fake)
    res = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--min-tau", "0"])
    assert res.exit_code == 0 and seen == {"min_tau": 0.0}, res.output


def probe_seen(monkeypatch, tmp_path, data: bytes):
    seen = []

    def fake(*a, probes, **k):
        seen.append(probes)
        raise draftsmith.DraftsmithError("stop here")

    monkeypatch.setattr(doctor, "diagnose", fake)
    (tmp_path / "probe.txt").write_bytes(data)
    res = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--probe", f"@{tmp_path / 'probe.txt'}"])
    return res, seen


def test_a_probe_file_of_exactly_the_limit_is_read_whole(monkeypatch, tmp_path):
    res, seen = probe_seen(monkeypatch, tmp_path, b"ab" * (limits.PROBE_BYTES // 2))
    assert res.exit_code == 2 and "stop here" in res.output, res.output
    assert seen == [["ab" * (limits.PROBE_BYTES // 2)]]


def test_a_probe_file_that_is_not_utf8_is_said_so(monkeypatch, tmp_path):
    res, seen = probe_seen(monkeypatch, tmp_path, b"def \xff(x):")
    assert res.exit_code == 2 and "cannot read the file (not UTF-8 text" in res.output and seen == [], res.output


def test_an_error_with_notes_is_said_with_them(monkeypatch):
    def fake(*a, **k):
        e = draftsmith.DraftsmithError("no such pair")
        e.add_note("note: look here")
        raise e

    monkeypatch.setattr(doctor, "diagnose", fake)
    res = CliRunner().invoke(app, ["doctor", "--spec", "demo"])
    assert res.exit_code == 2 and "error: no such pair\nnote: look here" in res.output, res.output


def test_the_table_keeps_its_columns_when_nothing_loaded(monkeypatch, demo_spec):
    """Numbers never wrap and a column that holds only dashes keeps the width of the numbers it would hold."""
    res = report(monkeypatch, Diagnosis(demo_spec, Candidate((), error="E"), low=True))
    assert res.exit_code == 2, res.output
    header = next(line for line in res.output.splitlines() if "reading" in line)
    assert [cell.strip() for cell in header.split("\u2503")[1:-1]] == [
        "reading", "tau", "p1", "p2", "p3", "p4", "p5", "loss", "note"]
    line = next(line for line in res.output.splitlines() if "spec as given" in line)
    assert line == ("\u2502 spec as given \u2502    - \u2502    - \u2502    - \u2502    - \u2502    - \u2502    - "
                    "\u2502     - \u2502 does not load (1) \u2502")


def test_the_defaults_are_32_tokens_per_probe_on_one_thread(monkeypatch, demo_spec):
    seen = {}

    def fake(*a, max_new_tokens, **k):
        seen["tokens"], seen["threads"] = max_new_tokens, torch.get_num_threads()
        return Diagnosis(demo_spec, Candidate((), m(4.5)), low=False)

    before = torch.get_num_threads()
    monkeypatch.setattr(doctor, "diagnose", fake)
    try:
        res = CliRunner().invoke(app, ["doctor", "--spec", "demo"])
    finally:
        torch.set_num_threads(before)
    assert res.exit_code == 0 and seen == {"tokens": 32, "threads": 1}, res.output
    assert "greedy chain, 32 tokens per probe" in " ".join(res.output.split())


def test_a_long_probe_file_name_is_cut_in_the_middle_to_300_characters(monkeypatch):
    monkeypatch.setattr(doctor, "diagnose", lambda *a, **k: pytest.fail("diagnosed"))
    res = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--probe", "@" + "p" * 1000])
    assert res.exit_code == 2, res.output
    assert f"--probe @{'p' * 148}...{'p' * 148}: cannot read the file" in res.output, res.output


def test_a_probe_beside_token_ids_is_not_read(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor, "diagnose", lambda *a, **k: pytest.fail("diagnosed"))
    res = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--token-ids", "1", "--probe", f"@{tmp_path / 'no'}"])
    assert res.exit_code == 2 and "both give the probe" in res.output, res.output
    assert "cannot read" not in res.output
