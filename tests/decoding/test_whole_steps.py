"""A step cut short by max_new_tokens (or a stop token) after the target accepted more than it emitted is recorded as
cut: generate's counts stay what it emitted (invariant 12), while Stats.whole_steps leaves such steps out, so
doctor's acceptance is the draft's, not where a probe ended (a doctor hunt, 2026-12-01: the demo pair read tau 4.43
at 32 tokens, 2.80 at 8, its whole steps 4.69); doctor's default bar is half a short chain's reach (a chain of 1
reaches tau 2 only when every draft is accepted: the default 2.0 called any miss low)."""
from __future__ import annotations

import pytest

import draftsmith
from draftsmith.decoding.stats import Stats
from draftsmith.doctor import default_bar, diagnose


def test_whole_steps_leave_the_cut_steps_out():
    st = Stats(accepted_per_position=[0, 0, 0])
    for accepted, cut in ((3, False), (1, False), (0, False), (0, True)):
        st.record_step(accepted, cut=cut)
    assert (st.steps, st.committed, st.accepted_per_position, st.cut) == (4, 8, [2, 1, 1], [0])
    assert st.whole_steps() == (7 / 3, [2, 1, 1], 3)
    st.record_step(2, cut=True)                   # a second sequence's cut step, two of its drafts emitted
    assert st.whole_steps() == (7 / 3, [2, 1, 1], 3)
    assert st.acceptance_length == 11 / 5         # generate's own count: what was emitted
    assert Stats().whole_steps() == (1.0, [], 0)
    only_cut = Stats(accepted_per_position=[0])
    only_cut.record_step(1, cut=True)
    assert only_cut.whole_steps() == (1.0, [0], 0)


PROMPT = "def binary_search(items, target):\n    lo, hi = 0, len(items) - 1\n"


@pytest.fixture(scope="module")
def model():
    return draftsmith.assemble("demo")


def steps_of(model, n: int, monkeypatch) -> tuple[list[tuple[int, bool]], Stats]:
    log = []
    real = Stats.record_step
    monkeypatch.setattr(Stats, "record_step", lambda self, a, cut=False: (log.append((a, cut)), real(self, a, cut)))
    out = model.generate(PROMPT, max_new_tokens=n, stop=[], topk=1, steps=5)
    monkeypatch.setattr(Stats, "record_step", real)
    return log, out.stats


def test_a_step_is_cut_exactly_where_a_longer_run_accepted_more(model, monkeypatch):
    """Greedy runs of one prompt share their steps; the last step of a shorter one is flagged cut exactly where
    the longer run's same step accepted more than it emitted, and whole_steps is the mean over the rest."""
    longest, _ = steps_of(model, 60, monkeypatch)
    cuts = 0
    for n in range(3, 30):
        log, stats = steps_of(model, n, monkeypatch)
        *whole, (last, cut) = log
        assert whole == longest[:len(whole)] and not any(c for _, c in whole)
        assert cut == (longest[len(whole)][0] > last), (n, log, longest)
        assert stats.committed == n - 1 == stats.new_tokens - 1   # invariant 12 holds whatever is cut
        kept = whole if cut else log
        assert stats.whole_steps()[0] == pytest.approx(sum(a + 1 for a, _ in kept) / len(kept))
        cuts += cut
    assert cuts >= 3   # the prompt's budget ends mid-chain often enough to test both sides


def test_doctor_measures_whole_steps(model, monkeypatch):
    """doctor's tau is whole_steps' (at a budget that cuts the last step: generate's own count differs)."""
    n = next(n for n in range(8, 30) if steps_of(model, n, monkeypatch)[0][-1][1])
    stats = steps_of(model, n, monkeypatch)[1]
    dx = diagnose("demo", max_new_tokens=n, search=False, probes=[PROMPT])
    assert dx.base.tau == pytest.approx(stats.whole_steps()[0]) != pytest.approx(stats.acceptance_length)
    assert dx.base.measure.steps == stats.steps - 1


@pytest.mark.parametrize("steps, bar", [(1, 1.5), (2, 2.0), (5, 2.0)])
def test_the_default_bar_is_half_a_short_chains_reach(steps, bar):
    assert default_bar(steps) == bar


def test_an_asked_bar_is_kept_and_the_default_follows_the_chain(tmp_path):
    import yaml

    from draftsmith.specs.catalog import BUILTIN_DIR

    data = yaml.safe_load((BUILTIN_DIR / "demo.yaml").read_text())
    data["name"], data["decoding"]["steps"], data["decoding"]["draft_tokens"] = "demo-1", 1, 2
    data["checkpoints"] = {k: str(BUILTIN_DIR.parents[1] / "demo_data" / k) for k in ("target", "draft")}
    spec = tmp_path / "demo-1.yaml"
    spec.write_text(yaml.safe_dump(data))
    assert diagnose(str(spec), search=False, probes=[PROMPT], max_new_tokens=8).min_tau == 1.5
    assert diagnose(str(spec), search=False, probes=[PROMPT], max_new_tokens=8, min_tau=2.0).min_tau == 2.0
