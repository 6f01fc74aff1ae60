"""Mutation round 13 (train/pipeline.py), continued: what the pipeline says at its edges, each pinned without a real
training run (the steps around it stubbed): ``resume_note`` (an older state, another vocabulary), ``start_fresh``
(the draft's taps recorded) and ``start`` (its vocabulary line and share, the draft weights a start from the target
leaves), ``other_spec_note``, ``other_chat_note``, ``chat_render``, ``prompt_room`` and ``evaluate``. Job's
defaults, reduced_vocab, self_distilled, run and run_held: test_pipeline_kills_round13.py."""
from types import SimpleNamespace

import pytest
import torch

import draftsmith
from draftsmith.train import data as D
from draftsmith.train import pipeline
from draftsmith.train.checks import TrainError
from draftsmith.train.loop import STATE

from test_pipeline_kills_round13 import fake_model   # a started model: its draft's taps, vocabulary and kept ids


# resume_note


def save_state(out, run):
    out.mkdir(exist_ok=True)
    torch.save({"config": {}, "run": run}, out / STATE)


def note(out, draft_vocab, kept=96):
    return pipeline.resume_note(SimpleNamespace(out=out, draft_vocab=draft_vocab), fake_model(kept=kept))


def test_resume_note_names_an_older_state_and_another_vocabulary_only(tmp_path):
    out = tmp_path / "out"
    assert note(out, 96) == ""                              # no trainer.pt
    save_state(out, {"spec": "eagle3-llama"})
    assert note(out, 96) == ""
    assert note(out, 1000, kept=258) == "" and note(out, None, kept=258) == ""
    assert note(out, 96, kept=258) == ("; it keeps its 258-token vocabulary (--draft-vocab applies to a fresh draft "
                                       "only)")
    save_state(out, None)
    assert note(out, 96).startswith(f"; {out / STATE} does not record the run's settings (an older draftsmith")


# start_fresh and start


def test_start_fresh_records_the_drafts_taps(job, tmp_path, monkeypatch):
    saved = []
    monkeypatch.setattr(pipeline, "start", lambda j, ids, log: fake_model(taps=(1, 2)))
    monkeypatch.setattr(pipeline, "save_start", lambda model, cfg, out, record: saved.append(record))
    pipeline.start_fresh(job(tmp_path / "a"), torch.arange(10), print)
    assert saved[0]["taps"] == [1, 2]


@pytest.fixture
def started(monkeypatch):
    """start(job, ids) -> (log lines, the kept ids init_draft got, start_from_target's calls), no draft written."""
    def go(j, ids, left=()):
        kept, starts, lines = [], [], []
        monkeypatch.setattr(pipeline, "init_draft", lambda spec, target, out, k, seed: kept.append(k) or "model")
        monkeypatch.setattr(pipeline, "start_from_target", lambda m: starts.append(m) or (["a", "b"], list(left)))
        assert pipeline.start(j, ids, lines.append) == "model"
        return lines, kept[0], starts
    return go


def test_a_fresh_drafts_vocabulary_and_its_share_of_the_data_are_logged(job, tmp_path, started):
    ids = torch.cat([torch.arange(200), torch.arange(50).repeat(3)])   # 0..49: 4 each, 50..199: once
    lines, kept, starts = started(job(tmp_path / "a", draft_vocab=96, config={"init": "random"}), ids)
    assert lines == ["draft vocabulary: the 96 most frequent target tokens, 70.29% of the data"]
    assert kept.tolist() == list(range(96)) and starts == []


def test_a_head_sharing_or_full_vocabulary_draft_says_so(job, tmp_path, started):
    ids = torch.arange(200)
    lines, kept, _ = started(job(tmp_path / "a", spec="eagle1-llama", draft_vocab=96), ids)
    assert kept is None and lines[0] == ("draft vocabulary: the target's full 258 tokens (the spec shares the "
                                         "target's head: --draft-vocab does not apply)")
    lines, kept, _ = started(job(tmp_path / "b", draft_vocab=None), ids)
    assert kept is None and lines[0] == "draft vocabulary: the target's full 258 tokens"
    lines, kept, starts = started(job(tmp_path / "c", draft_vocab=1000), ids)
    assert kept is None and lines == ["draft vocabulary: the target's full 258 tokens (--draft-vocab 1000 is not "
                                      "below it)", "start: 2 draft weights from the target's last layer"]
    assert starts == ["model"]


# other_spec_note, other_chat_note


def spec_note(out, run):
    save_state(out, run)
    return pipeline.other_spec_note(SimpleNamespace(out=out, spec="eagle3-llama"))


def test_other_spec_note_only_for_another_spec_or_reading(tmp_path):
    from draftsmith.train.resume import spec_digest

    out = tmp_path / "out"
    assert pipeline.other_spec_note(SimpleNamespace(out=out, spec="eagle3-llama")) is None
    digest = spec_digest(draftsmith.load_spec("eagle3-llama"))
    assert spec_note(out, None) is None and spec_note(out, {"spec": None}) is None
    assert spec_note(out, {"spec": "eagle3-llama", "spec_digest": digest}) is None
    said = spec_note(out, {"spec": "eagle3-llama", "spec_digest": "other"})
    assert said.startswith(f"note: the draft in {out} was trained with another spec named 'eagle3-llama' (it reads "
                           "the draft otherwise); it is measured here as spec 'eagle3-llama' reads it")
    other = spec_digest(draftsmith.load_spec("eagle1-llama"))
    assert "trained with spec 'eagle1-llama';" in spec_note(out, {"spec": "eagle1-llama", "spec_digest": other})
    assert spec_note(out, {"spec": "renamed", "spec_digest": digest}) is None   # a name alone shapes no draft
    said = spec_note(out, {"spec": "mine", "spec_digest": other, "spec_given": "/x/mine.yaml"})
    assert said.endswith("give the --spec it was trained with (--spec /x/mine.yaml) to measure it as trained")


def chat_note(out, run, chat):
    save_state(out, run)
    return pipeline.other_chat_note(SimpleNamespace(out=out, chat=chat))


def test_other_chat_note_only_when_the_state_records_the_other_setting(tmp_path):
    out = tmp_path / "out"
    assert pipeline.other_chat_note(SimpleNamespace(out=out, chat=False)) is None
    assert chat_note(out, None, False) is None and chat_note(out, {"spec": "x"}, False) is None
    assert chat_note(out, {"chat": "yes"}, False) is None and chat_note(out, {"chat": False}, False) is None
    assert chat_note(out, {"chat": True}, False) == (
        f"note: the draft in {out} was trained with --chat; its held-out chat records are read here with "
        "--no-chat: give --chat to measure it as trained")


# chat_render, prompt_room


class Templated:
    chat_template = "{{ messages }}"

    def __init__(self):
        self.asked = []

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        self.asked.append(add_generation_prompt)
        return "|".join(m["content"] for m in messages)


def test_chat_render_renders_without_the_generation_prompt_and_refuses_no_template():
    assert pipeline.chat_render(SimpleNamespace(chat=False, target="t"), object()) is None
    tok = Templated()
    render = pipeline.chat_render(SimpleNamespace(chat=True, target="t"), tok)
    assert render([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]) == "a|b"
    assert tok.asked == [False]
    with pytest.raises(TrainError) as e:
        pipeline.chat_render(SimpleNamespace(chat=True, target="t"), SimpleNamespace(chat_template=None))
    ((name, why),) = e.value.problems
    assert name == "chat" and why.endswith("drop --chat")


def test_prompt_room_names_where_each_kind_of_file_holds_a_prompt(tmp_path):
    text = "past its first third (a text file's prompt starts there)"
    assert pipeline.prompt_room([tmp_path / "a.jsonl", tmp_path / "b.json"]).startswith("in one record")
    assert pipeline.prompt_room([tmp_path / "a.txt", tmp_path / "b.py"]) == text
    assert pipeline.prompt_room([tmp_path / "a.txt", tmp_path / "b.jsonl"]).startswith(
        "past its first third (a text file) or in one record")


# evaluate


@pytest.fixture
def measured(monkeypatch):
    """measured(job, n) -> (results, lines): evaluate with n held-out prompts found and the decoding stubbed."""
    def go(j, n):
        monkeypatch.setattr(D, "held_out_prompts", lambda files, tok, k, t, seed, render: [[1, 2]] * n)
        monkeypatch.setattr(draftsmith, "assemble", lambda spec, target, draft, device: "model")
        monkeypatch.setattr(pipeline, "acceptance", lambda model, prompts, max_new_tokens, **plan:
                            SimpleNamespace(line=lambda: f"tau {len(prompts)}"))
        lines = []
        return pipeline.evaluate(j, None, lines.append), lines
    return go


def test_evaluate_measures_nothing_without_held_out_files_or_prompts(job, tmp_path, measured):
    j = job(tmp_path, eval_prompts=2)
    j.held_out = []   # said: a run without --eval or --stdlib measured nothing without a word (2026-12-01)
    assert measured(j, 2) == ({}, ["held-out: none given (--eval PATH, or --stdlib), so acceptance is not measured"])
    assert measured(job(tmp_path, eval_prompts=0), 2) == ({}, [])
    j = job(tmp_path, eval_prompts=0)
    j.held_out = []
    assert measured(j, 2) == ({}, [])   # none asked for: nothing to say


def test_evaluate_measures_each_plan_and_says_when_prompts_are_fewer_than_asked(job, tmp_path, measured):
    results, lines = measured(job(tmp_path, eval_prompts=2), 2)
    assert set(results) == set(pipeline.PLANS) and len(lines) == len(pipeline.PLANS)
    assert all(line.startswith("held-out (2 prompts, 64 new tokens) ") for line in lines)
    _, lines = measured(job(tmp_path, eval_prompts=3), 2)
    assert lines[0].startswith("held-out: 2 prompts of the 3 asked for (--eval-prompts): a text file gives one, if "
                               "it has 192 tokens past its first third")


def test_no_held_out_prompt_is_said_or_refused_with_eval_only(job, tmp_path, measured):
    why = ("held-out: none of the 1 files has 192 tokens past its first third (a text file's prompt starts there), "
           "so no prompt to measure acceptance on")
    assert measured(job(tmp_path, eval_prompts=2), 0) == ({}, [why])
    with pytest.raises(TrainError, match="none of the 1 files has 192 tokens"):
        measured(job(tmp_path, eval_prompts=2, eval_only=True), 0)


# Equivalent mutant left (not killable):
# - pipeline.py:212 `job.draft_vocab < V` -> `<=`: at draft_vocab == V both branches give asked = V, and elsewhere
#   the two comparisons agree, so the note is the same.


def test_the_draft_weights_a_start_from_the_target_leaves_are_named(job, tmp_path, started):
    # a mixture-of-experts or latent-attention last layer has no namesake for a Llama draft's MLP / attention
    left = [f"layers.0.mlp.{p}_proj.weight" for p in ("gate", "up", "down")]
    lines, _, _ = started(job(tmp_path / "a", draft_vocab=1000), torch.arange(200), left)
    assert lines[-1] == ("start: 2 draft weights from the target's last layer; 3 keep their fresh start, no weight of "
                         "that layer having their name and a shape they take ('layers.0.mlp.down_proj.weight', "
                         "'layers.0.mlp.gate_proj.weight', 'layers.0.mlp.up_proj.weight')")
