"""Mutation survivors of draftsmith/decoding/runners.py and draftsmith/convert/same_draft.py (round 11).

runners.py: the forward and addressing timers a run's statistics read, and TargetRunner.forward's default hand-over.
same_draft.py: a spec value that is a mapping on one side only, the aux ids a family leaves to the config, the quant
section named by its ``method``, and the bounds within which convert's last line quotes values and folders.
Killed 25/31 -> 29/31 (runners.py) and 30/43 -> 43/43 (same_draft.py). The two left, StepCache's default size
32 -> 31 / 33, are equivalent in results: the size only decides when a step is built anew instead of replayed.
Each test was seen failing with the mutant it answers planted by hand."""
import re
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from draftsmith.convert import same_draft
from draftsmith.convert.same_draft import build_differences, other_draft_line, spec_differences
from draftsmith.decoding import engine
from draftsmith.decoding.stats import Stats

PROMPTS = [[7], [5, 17, 3], [9, 1, 33, 7, 12, 40]]


def _prefill_args(prompts):
    """The prefill's inputs for a fresh pool, as engine.prefill builds them: ids, rows, rel_pos, rel_mask, counts."""
    B, T = len(prompts), max(map(len, prompts))
    ids = torch.tensor([p + [0] * (T - len(p)) for p in prompts])
    counts = torch.tensor([len(p) for p in prompts])
    ar = torch.arange(T)
    rows = engine.causal_rows(counts, ar, torch.ones(B, dtype=torch.bool))
    return ids, rows, ar.expand(B, T), None, counts


# --- runners.py ---------------------------------------------------------------------------------------------------

def test_each_runners_forward_and_addressing_time_is_its_own_share_of_the_wall_time(pairs):
    # catches runners.py:36 / :64 / :87 `time.perf_counter() - t0` -> `+ t0` (addressing, target forward, draft
    # forward): each timer adds the time a call took, so addressing <= forward <= the wall time around the calls
    model = pairs["eagle1"]
    target, draft = model._runners(PROMPTS, 8)
    target.stats, draft.stats = Stats(), Stats()     # apart, so the target's and the draft's timers are seen apart
    s = model._settings(8, 0.0, 1.0, 0, None, [])
    t0 = time.perf_counter()
    with torch.inference_mode():
        engine.prefill(target, draft, [engine.Seq(list(p)) for p in PROMPTS], s, Stats())
    wall = time.perf_counter() - t0
    for runner in (target, draft):
        st = runner.stats
        assert 0 < st.addressing_seconds <= st.forward_seconds <= wall, (type(runner).__name__, st, wall)


def test_a_target_forward_hands_over_unless_told_not_to_and_is_not_timed(pairs):
    # catches runners.py:51 `hand_over=True` -> False (TargetRunner.forward called as its class documents,
    # (ids, rows, rel_pos, rel_mask) -> (logits, hand-over), hands over what a timed call hands over)
    model = pairs["eagle1"]
    target, _ = model._runners(PROMPTS, 8)
    target.stats = Stats()
    ids, rows, rel_pos, rel_mask, counts = _prefill_args(PROMPTS)
    with torch.inference_mode():
        target.pool.reset()
        logits, handover = target.forward(ids, rows, rel_pos, rel_mask, prompt_lens=counts)
        assert target.stats.forward_seconds == 0.0          # forward() is the untimed part of a call
        target.pool.reset()
        want_logits, want = target(ids, rows, rel_pos, rel_mask, prompt_lens=counts, hand_over=True)
        target.pool.reset()
        _, none = target(ids, rows, rel_pos, rel_mask, prompt_lens=counts, hand_over=False)
    assert handover is not None and none is None
    torch.testing.assert_close(handover, want, rtol=0, atol=0)
    torch.testing.assert_close(logits, want_logits, rtol=0, atol=0)
    assert logits.shape[0] == len(PROMPTS) and logits.dim() == 2     # at each row's last prompt token


# --- same_draft.py ------------------------------------------------------------------------------------------------

def test_a_section_that_is_a_mapping_on_one_side_only_is_one_difference():
    # catches same_draft.py:33 `isinstance(proposed, Mapping) and isinstance(family, Mapping)` -> `or` (the
    # mutant digs into the plain side with .get and fails)
    assert spec_differences({"draft": {"norm": {"kind": "rms"}}}, {"draft": {"norm": None}}) == [
        ("draft.norm", {"kind": "rms"})]
    assert spec_differences({"draft": {"norm": "rms"}}, {"draft": {"norm": {"kind": "rms"}}}) == [
        ("draft.norm", "rms")]


def test_aux_ids_are_no_difference_only_where_the_family_leaves_them_to_the_config():
    # catches same_draft.py:31 `family is None` -> `is not None`
    ids = lambda v: {"draft": {"fusion": {"kind": "eagle3", "aux_layers": {"ids": v}}}}  # noqa: E731
    assert spec_differences(ids([1, 4, 7]), ids(None)) == []
    assert spec_differences(ids([1, 4, 7]), {"draft": {"fusion": {"kind": "eagle3", "aux_layers": {}}}}) == []
    assert spec_differences(ids([1, 4, 7]), ids([2, 4, 7])) == [("draft.fusion.aux_layers.ids", [1, 4, 7])]
    assert spec_differences(ids([1, 4, 7]), ids([1, 4, 7])) == []


def test_another_quant_method_is_one_difference_of_the_whole_section():
    # catches same_draft.py:53 `s.path == section` -> `!=` (quant's reference key is `method`, not `kind`: the
    # mutant compared a `kind` neither side has and listed fp8's params one by one)
    diff = build_differences({"quant": {"method": "none"}}, {"quant": {"method": "fp8"}})
    assert len(diff) == 1
    path, ours, theirs = diff[0]
    assert (path, ours, theirs["method"]) == ("quant", {"method": "none"}, "fp8")
    assert build_differences({"quant": {"method": "fp8"}}, {"quant": {"method": "fp8"}}) == []


def _said_in_line(value) -> str:
    line = other_draft_line(SimpleNamespace(match=SimpleNamespace(spec="e")), None, [("draft.x", None, value)])
    return line.split("(draft.x: ", 1)[1].removesuffix(", not unstated)")


def test_a_difference_line_quotes_a_value_of_up_to_60_characters_whole(monkeypatch):
    # catches same_draft.py:118 `short(value, 60)` -> 59 / 61
    monkeypatch.setattr(same_draft, "source_reading", lambda found, source: "load it with spec src")
    assert _said_in_line("a" * 58) == "'" + "a" * 58 + "'"                  # repr of 60 characters: whole
    assert _said_in_line("a" * 59) == "'" + "a" * 56 + "..."                # 61: cut to 60


def test_a_difference_line_quotes_a_component_name_of_up_to_40_characters_whole(monkeypatch):
    # catches same_draft.py:117 `short(name, 40)` -> 39 / 41
    monkeypatch.setattr(same_draft, "source_reading", lambda found, source: "load it with spec src")
    assert _said_in_line({"kind": "n" * 38}) == "'" + "n" * 38 + "'"
    assert _said_in_line({"kind": "n" * 39}) == "'" + "n" * 36 + "..."


def test_a_difference_line_quotes_a_component_param_of_up_to_30_characters_whole(monkeypatch):
    # catches same_draft.py:116 `short(v, 30)` -> 29 / 31
    monkeypatch.setattr(same_draft, "source_reading", lambda found, source: "load it with spec src")
    assert _said_in_line({"kind": "k", "p": "v" * 28}) == "'k' (p: '" + "v" * 28 + "')"
    assert _said_in_line({"kind": "k", "p": "v" * 29}) == "'k' (p: '" + "v" * 26 + "...)"


def _folders_said(monkeypatch, length: int) -> tuple[str, str, str, str]:
    """The source and written folders (paths of ``length`` characters) as source_reading says them, where only
    the written folder's weights section reads the written names, and the two paths."""
    src, out = (("/" + "/".join([c * 9] * 40))[:length - 4] + "/end" for c in "so")
    weights = {"rules": []}
    monkeypatch.setattr(same_draft, "_reads", lambda folder, data: data["weights"] is weights)
    source = SimpleNamespace(folder=Path(src), spec={"checkpoints": {}, "weights": {}},
                             match=SimpleNamespace(spec="fam"))
    found = SimpleNamespace(folder=Path(out), spec={"weights": weights})
    line = same_draft.source_reading(found, source)
    said_src, said_out = re.findall(r"`draftsmith inspect (.*?)` prints", line)
    return said_src, said_out, src, out


def test_folders_of_up_to_300_characters_are_named_whole(monkeypatch):
    # catches same_draft.py:99 `short_text(source.folder, 300)` -> 299 and `short_text(found.folder, 300)` -> 299
    said_src, said_out, src, out = _folders_said(monkeypatch, 300)
    assert len(src) == len(out) == 300
    assert (said_src, said_out) == (src, out)


def test_longer_folders_are_cut_to_300_characters_keeping_both_ends(monkeypatch):
    # catches same_draft.py:99 `short_text(source.folder, 300)` -> 301 and `short_text(found.folder, 300)` -> 301
    said_src, said_out, src, out = _folders_said(monkeypatch, 301)
    for said, path in ((said_src, src), (said_out, out)):
        assert len(said) <= 300 and "..." in said, said
        head, tail = said.split("...")
        assert path.startswith(head) and path.endswith(tail) and tail.endswith("/end")
