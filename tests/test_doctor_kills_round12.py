"""Mutation round 12 on ``doctor`` (draftsmith/doctor.py and draftsmith/cli/doctor.py): how diagnose() searches,
pinned where a planted bug survived the other doctor tests.

Most tests here replace the expensive part (measuring a reading) with a stand-in, so the search's rules (rounds, ties
broken by the declared default, the margins a fix must clear, the bar itself) and what a reading that does not load
reports are checked exactly and fast; the few that measure use the shipped demo pair. The command's report (one
column per draft position, numbered load errors, the readings left out, the verdict lines and exit codes) and its
own options: test_doctor_report_kills_round12.py."""
import pytest
import torch
import yaml

import draftsmith
import draftsmith.doctor as doctor
from draftsmith.doctor import PROBES, Ambiguity, Candidate, Measure, diagnose
from draftsmith.specs.catalog import BUILTIN_DIR

DEMO = BUILTIN_DIR.parents[1] / "demo_data"
ROPE, FEED, D2T = (Ambiguity(p, "") for p in ("draft.attention.rope", "draft.feed_back", "draft.vocab.d2t"))


def flipped_demo(tmp_path, **draft) -> str:
    """The demo spec with some draft settings changed (fusion ones under ``fusion``), its checkpoints absolute."""
    data = yaml.safe_load((BUILTIN_DIR / "demo.yaml").read_text())
    data["checkpoints"] = {"target": str(DEMO / "target"), "draft": str(DEMO / "draft")}
    for key, value in draft.items():
        if key == "rope":
            data["draft"]["attention"]["rope"] = value
        else:
            data["draft"][key] = value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_the_readings_table_cannot_be_edited_in_place():
    """AMBIGUITIES is every diagnose()'s default: a reading changed in place would change every later run."""
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        doctor.AMBIGUITIES[0].path = "draft.elsewhere"


# --- diagnose()'s search, each reading scored by a stand-in ------------------------------------------------------

def scored(monkeypatch, score):
    """Readings measured by ``score(changes) -> tau`` (None: it does not load); returns the changes tried, in order."""
    tried = []

    def run(spec, changes, *a, **k):
        tried.append(tuple(changes))
        tau = score(dict(changes))
        if tau is None:
            return Candidate(tuple(changes), error="RuntimeError: no")
        return Candidate(tuple(changes), Measure(tau, [0.5], 10, None))

    monkeypatch.setattr(doctor, "run_candidate", run)
    return tried


def test_a_tau_exactly_at_the_bar_is_fine_and_not_searched(monkeypatch):
    import time

    tried = scored(monkeypatch, lambda ch: 2.0)
    t0 = time.perf_counter()
    dx = diagnose("demo", min_tau=2.0, ambiguities=[ROPE])
    assert not dx.low and tried == [()] and dx.candidates == [] and dx.fix is None
    assert 0 < dx.seconds <= time.perf_counter() - t0   # the time the report says it took
    t0 = time.perf_counter()
    dx = diagnose("demo", min_tau=2.0, search=True, ambiguities=[ROPE])   # asked for: searched all the same
    assert tried[1:] == [(), (("draft.attention.rope", "interleaved"),)] and dx.fix is None
    assert 0 < dx.seconds <= time.perf_counter() - t0


def test_by_default_both_probes_are_measured_over_32_tokens_as_the_command_does(monkeypatch):
    seen = []
    monkeypatch.setattr(doctor, "run_candidate", lambda spec, changes, target, draft, probes, tokens, *a, **k:
                        seen.append((probes, tokens)) or Candidate((), Measure(4.0, [0.5], 10, None)))
    diagnose("demo")
    assert seen == [(PROBES, 32)]


def test_a_bar_of_zero_is_allowed(monkeypatch):
    scored(monkeypatch, lambda ch: 1.0)
    assert not diagnose("demo", min_tau=0, ambiguities=[ROPE]).low
    assert not diagnose("demo", min_tau=0.0, ambiguities=[ROPE]).low
    assert doctor.min_tau_ok(0) and not doctor.min_tau_ok(True) and not doctor.min_tau_ok(-0.01)


def test_no_search_leaves_a_low_pair_unsearched(monkeypatch):
    tried = scored(monkeypatch, lambda ch: 1.0)
    dx = diagnose("demo", search=False, ambiguities=[ROPE])
    assert dx.low and tried == [()] and dx.candidates == [] and dx.fix is None


def test_two_rounds_by_default_each_on_top_of_the_best_and_never_the_current_value(monkeypatch):
    """Every reading lifts tau by 0.5: round 1 picks the first, round 2 adds the next on top (not retrying the
    changed field, nor any field's current value), and the search stops after two rounds though tau is still low."""
    tried = scored(monkeypatch, lambda ch: 1.0 + 0.5 * len(ch))
    dx = diagnose("demo", min_tau=10, ambiguities=[ROPE, FEED, D2T])
    rope, feed, d2t = ("draft.attention.rope", "interleaved"), ("draft.feed_back", "post_norm"), \
        ("draft.vocab.d2t", "absolute")
    assert tried == [(), (rope,), (feed,), (d2t,), (rope, feed), (rope, d2t)]
    assert dx.low and dx.fix.changes == (rope, feed) and dx.fix.tau == 2.0
    assert dx.candidates[0] is dx.fix and [c.tau for c in dx.candidates] == [2.0, 2.0, 1.5, 1.5, 1.5]
    one = diagnose("demo", min_tau=10, rounds=1, ambiguities=[ROPE, FEED, D2T])
    assert one.fix.changes == (rope,) and len(one.candidates) == 3
    three = diagnose("demo", min_tau=10, rounds=3, ambiguities=[ROPE, FEED, D2T])
    assert three.fix.changes == (rope, feed, d2t) and three.fix.tau == 2.5


def test_the_search_stops_once_the_best_reaches_the_bar(monkeypatch):
    tried = scored(monkeypatch, lambda ch: 1.0 + 0.5 * len(ch))
    dx = diagnose("demo", min_tau=1.5, ambiguities=[ROPE, FEED])
    assert len(tried) == 3 and dx.fix.changes == (("draft.attention.rope", "interleaved"),)


def test_no_reading_that_loads_ends_the_search_without_a_fix(monkeypatch):
    tried = scored(monkeypatch, lambda ch: None if ch else 1.0)
    dx = diagnose("demo", ambiguities=[ROPE, FEED])
    assert len(tried) == 3 and dx.fix is None and [c.error for c in dx.candidates] == ["RuntimeError: no"] * 2


def test_a_working_reading_fixes_a_spec_that_does_not_load(monkeypatch):
    scored(monkeypatch, lambda ch: 1.2 if ch.get("draft.feed_back") else None)
    dx = diagnose("demo", ambiguities=[ROPE, FEED])
    assert dx.low and dx.base.measure is None
    assert dx.fix.changes == (("draft.feed_back", "post_norm"),) and dx.candidates[0] is dx.fix
    assert dx.candidates[-1].measure is None and dx.candidates[-1].changes == (("draft.attention.rope",
                                                                                "interleaved"),)   # failed: last


def test_equally_good_readings_prefer_the_fields_declared_defaults(monkeypatch, tmp_path):
    """A spec with rope and feed_back read the other way: neox and pre_norm are the declared defaults, d2t absolute
    is not. At one tau, a declared reading ranks first though d2t was tried first; on top of a declared best, a
    declared second change stays declared and an undeclared one does not."""
    spec = flipped_demo(tmp_path, rope="interleaved", feed_back="post_norm")
    scored(monkeypatch, lambda ch: 3.0 if ch else 1.0)
    dx = diagnose(spec, ambiguities=[D2T, FEED, ROPE])
    assert dx.fix.changes == (("draft.feed_back", "pre_norm"),)
    assert [(c.describe(), c.declared) for c in dx.candidates] == [
        ("draft.feed_back = pre_norm", True), ("draft.attention.rope = neox", True),
        ("draft.vocab.d2t = absolute", False)]
    scored(monkeypatch, lambda ch: 1.0 + 0.5 * len(ch))   # still low after round 1: a second round on feed_back
    dx = diagnose(spec, min_tau=10, ambiguities=[D2T, FEED, ROPE])
    assert dx.fix.changes == (("draft.feed_back", "pre_norm"), ("draft.attention.rope", "neox")) and dx.fix.declared
    second = {c.describe(): c.declared for c in dx.candidates if len(c.changes) == 2}
    assert second == {"draft.feed_back = pre_norm, draft.vocab.d2t = absolute": False,
                      "draft.feed_back = pre_norm, draft.attention.rope = neox": True}


def test_a_field_the_components_lack_is_said_once_as_not_applicable(monkeypatch):
    scored(monkeypatch, lambda ch: 1.0 + 0.5 * len(ch))
    nope = Ambiguity("draft.no_such_field", "")
    dx = diagnose("demo", min_tau=10, ambiguities=[nope, ROPE, FEED, nope])
    assert dx.not_applicable == ["draft.no_such_field"] and len(dx.fix.changes) == 2
    scored(monkeypatch, lambda ch: 1.0)   # no reading does better: one round, and the field is named all the same
    dx = diagnose("demo", ambiguities=[nope, ROPE])
    assert dx.fix is None and dx.not_applicable == ["draft.no_such_field"]


# --- the margins a reading must clear to be the fix --------------------------------------------------------------

def _c(tau, loss=None, per=(0.5,), changes=(("x", 1),)):
    return Candidate(changes, Measure(tau, list(per), 1, loss))


def test_a_tau_gain_exactly_at_both_margins_is_clearly_better():
    assert doctor.clearly_better(_c(4.2), _c(4.0))          # 5% exactly (and more than 0.15)
    assert not doctor.clearly_better(_c(4.19), _c(4.0))
    assert doctor.clearly_better(_c(2.15), _c(2.0))         # 0.15 exactly (and more than 5%)
    assert not doctor.clearly_better(_c(2.14), _c(2.0))
    assert doctor.clearly_better(_c(1.0), Candidate((), error="E")) and not doctor.clearly_better(
        Candidate((), error="E"), _c(1.0))


def test_a_loss_drop_exactly_at_both_margins_is_clearly_lower():
    base = _c(1.5, 2.0, per=(0.3,), changes=())
    assert doctor.clearly_lower_loss(_c(1.5, 1.8, per=(0.4,)), base)        # 10% and 0.2 nats
    assert not doctor.clearly_lower_loss(_c(1.5, 1.81, per=(0.4,)), base)
    small = _c(1.5, 0.5, per=(0.3,), changes=())
    assert doctor.clearly_lower_loss(_c(1.5, 0.4, per=(0.4,)), small)       # 0.1 nats exactly (20%)
    assert not doctor.clearly_lower_loss(_c(1.5, 0.41, per=(0.4,)), small)
    assert not doctor.clearly_lower_loss(_c(1.49, 1.0, per=(0.4,)), base)   # a lower tau
    assert not doctor.clearly_lower_loss(_c(1.5, None, per=(0.4,)), base)
    assert not doctor.clearly_lower_loss(_c(1.5, 1.0, per=(0.4,)), _c(1.5, None, per=(0.3,)))
    assert not doctor.clearly_lower_loss(_c(1.5, 1.0, per=(0.3,)), base)   # drafted alike at every position


def test_a_fix_by_loss_needs_a_tau_no_lower_than_the_best():
    base = _c(1.5, 2.0, per=(0.3,), changes=())
    lower_tau = _c(1.45, 1.0, per=(0.4,))
    assert doctor.next_best([lower_tau], base) is None
    same = _c(1.5, 1.0, per=(0.4,))
    assert doctor.next_best([lower_tau, same], base) is same


def test_a_fix_by_loss_between_equal_losses_is_the_declared_reading():
    base = _c(1.5, 2.0, per=(0.3,), changes=())
    other, declared = _c(1.5, 1.0, per=(0.4,)), _c(1.5, 1.0, per=(0.4,), changes=(("y", 2),))
    declared.declared = True
    assert doctor.next_best([other, declared], base) is declared


def test_the_rank_puts_higher_tau_first_then_lower_loss_then_fewer_changes():
    a, b = _c(2.0, 1.0), _c(3.0, 2.0)
    one, two = _c(2.0, 1.0), _c(2.0, 1.0, changes=(("x", 1), ("y", 2)))
    assert sorted([a, b], key=doctor.rank) == [b, a]
    assert sorted([two, one], key=doctor.rank) == [one, two]
    assert sorted([_c(2.0, 1.5), a], key=doctor.rank)[0] is a


# --- what a reading that does not load reports -------------------------------------------------------------------

def broken_assemble(monkeypatch, message: str, notes=()):
    def assemble(*a, **k):
        e = ValueError(message)
        for n in notes:
            e.add_note(n)
        raise e

    monkeypatch.setattr("draftsmith.assembler.assemble.assemble", assemble)


def test_a_load_error_is_its_first_line_and_the_next_two_and_the_whole_with_notes(monkeypatch):
    broken_assemble(monkeypatch, "first\n second \nthird\nfourth", notes=["note: a hint"])
    dx = diagnose("demo", search=False)
    assert dx.base.error == "ValueError: first; second; third"
    assert dx.base.detail == "ValueError: first\n second \nthird\nfourth\nnote: a hint"


@pytest.mark.parametrize("size, cut", [(400, False), (401, True)])
def test_a_long_load_error_is_cut_to_400_characters(monkeypatch, size, cut):
    broken_assemble(monkeypatch, "x" * (size - len("ValueError: ")))
    error = diagnose("demo", search=False).base.error
    assert len(error) == 400 and error.endswith("...") == cut


# --- measuring on the demo pair ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_model():
    torch.set_num_threads(1)
    return draftsmith.assemble(draftsmith.load_spec("demo"))


def test_the_measure_is_a_chain_of_the_specs_steps_and_the_loss_over_three(demo_model):
    from draftsmith.decoding.arguments import check_call

    m = doctor.measure(demo_model, [PROBES[1]], 16)
    steps = demo_model.spec.decoding.steps
    assert m.steps > 0 and len(m.per_position) == steps and all(0 <= a <= 1 for a in m.per_position)
    assert m.tau == pytest.approx(1 + sum(m.per_position))
    prompts, _ = check_call(demo_model, [PROBES[1]], max_new_tokens=16)
    out = demo_model.generate(prompts, max_new_tokens=16, stop=[], topk=1, steps=steps)
    assert m.loss == pytest.approx(doctor.draft_loss(demo_model, [prompts[0] + out[0].token_ids], 3))


def test_the_draft_loss_is_the_training_loss_per_step_averaged_over_texts_long_enough(demo_model):
    """draft_loss is TTT's summed cross-entropy (decay 1, hard labels) divided by the steps, a mean over the texts
    long enough to unroll them; shorter ones are skipped, and none long enough gives no loss."""
    from draftsmith.train.features import target_features
    from draftsmith.train.ttt import ttt_losses

    ids = list(demo_model.tokenizer.encode(PROBES[1]))[:12]
    with torch.no_grad():
        batch = target_features(demo_model.target, torch.tensor([ids]), demo_model.draft.taps or ())
        summed = float(ttt_losses(demo_model, batch, 3, decay=1.0, labels="hard")[0])
    one = doctor.draft_loss(demo_model, [ids], 3)
    assert one == pytest.approx(summed / 3) and one > 0
    assert doctor.draft_loss(demo_model, [ids, ids], 3) == pytest.approx(one)
    assert doctor.draft_loss(demo_model, [ids[:4]], 3) is None      # steps + 1 tokens: nothing to teacher-force
    assert doctor.draft_loss(demo_model, [ids[:5]], 3) is not None
    assert doctor.draft_loss(demo_model, [ids[:4], ids], 3) == pytest.approx(one)
