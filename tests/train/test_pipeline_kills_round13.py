"""Mutation round 13 (train/pipeline.py): the edges its surviving mutants showed untested, each pinned without a
real training run (the steps around it stubbed). Job's defaults are the command line's; the reduced vocabulary
keeps the most frequent ids, lower ids first among equal counts, and none at or past the target's size;
self-distillation decodes every prompt, 16 to a batch and one per document by default; ``run`` checks a cached
target's folder again and a plain folder once; ``run_held`` refuses data shorter than a window unless it
self-distils or reads only the features on disk, names the tokens of data that gave no text, extracts into
out/features, self-distils seq // 4-token prompts only when it extracts, records the draft's taps, says what the
features do not record and whether a step was run; ``source_check``, ``store_problems`` (a window holds ttt + 1
tokens), ``labels_note``, ``resume_note``, ``start`` (its vocabulary line and share), ``other_spec_note``,
``other_chat_note``, ``chat_render``, ``prompt_room`` and ``evaluate`` each say what they should at their edges."""
import importlib
import inspect
from types import SimpleNamespace

import pytest
import torch

import draftsmith
from draftsmith import hub
from draftsmith.train import Job
from draftsmith.train import data as D
from draftsmith.train import pipeline
from draftsmith.train.checks import TrainError
from draftsmith.train.loop import STATE


# Job's defaults


def test_the_python_apis_defaults_are_the_command_lines():
    cli = inspect.signature(importlib.import_module("draftsmith.cli.train").train).parameters
    job = Job(spec="eagle3-llama", target=None, out="out")
    for name in ("seq", "draft_vocab", "self_distill", "prompts_per_doc", "distill_batch", "eval_prompts",
                 "eval_only", "chat", "device"):
        assert getattr(job, name) == cli[name].default.default, name
    assert (job.eval_prompt_tokens, job.eval_new_tokens) == (128, 64)   # the README's held-out measure
    assert (job.seq, job.draft_vocab, job.distill_batch, job.eval_prompts) == (512, 12288, 16, 8)
    assert (job.self_distill, job.prompts_per_doc, job.eval_only, job.chat) == (0, 1, False, False)


# reduced_vocab


def test_no_reduced_vocabulary_at_or_past_the_targets_size_or_when_none_is_asked():
    ids = torch.tensor([1, 2, 2, 3])
    for size in (None, 0, 10, 11):
        assert pipeline.reduced_vocab(ids, 10, size) is None, size
    assert pipeline.reduced_vocab(ids, 10, 9).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]


def test_the_most_frequent_ids_are_kept_lower_ids_first_among_equal_counts():
    ids = torch.tensor([5, 5, 7, 7, 2, 2, 9, 0])
    assert pipeline.reduced_vocab(ids, 10, 2).tolist() == [2, 5]
    assert pipeline.reduced_vocab(ids, 10, 4).tolist() == [0, 2, 5, 7]   # 0 and 9 once each: 0 is lower
    assert pipeline.reduced_vocab(torch.tensor([8, 8, 8, 1]), 10, 1).tolist() == [8]
    # many equal counts: an unstable sort keeps another 100 of them
    assert pipeline.reduced_vocab(torch.arange(5000), 5000, 100).tolist() == list(range(100))


# self_distilled


class CharTok:
    """Token ids are the characters' code points, after a BOS (1) where special tokens are added."""
    eos_token_id = 0

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [1] * add_special_tokens + [ord(c) for c in text]}

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


class Echo:
    """A target whose greedy continuation is '!' repeated; it records each batch's size."""

    def __init__(self):
        self.batches = []

    def generate_baseline(self, chunk, max_new_tokens):
        self.batches.append(len(chunk))
        return [SimpleNamespace(token_ids=[ord("!")] * max_new_tokens) for _ in chunk]


def test_self_distillation_decodes_every_prompt_16_to_a_batch_and_one_per_document_by_default():
    docs = [f"d{i:02d}\nsecond line\nthird line\n" for i in range(17)]
    model, lines = Echo(), []
    out = pipeline.self_distilled(model, docs, CharTok(), 3, 2, lines.append)
    assert model.batches == [16, 1]
    assert out == [f"d{i:02d}!!" for i in range(17)]
    assert lines == ["self-distillation: 16/17 documents", "self-distillation: 17/17 documents"]


def test_self_distillation_batches_of_two_cover_every_prompt_in_order():
    docs = ["ab", "cd", "", "ef", "gh", "ij"]
    model = Echo()
    assert pipeline.self_distilled(model, docs, CharTok(), 1, 1, lambda _: None, batch=2) == \
        ["a!", "c!", "e!", "g!", "i!"]
    assert model.batches == [2, 2, 1]


# run: a cached target's folder is checked again, a plain one once


def test_a_plain_target_folder_is_checked_once_and_a_cached_one_again(tiny, tmp_path, monkeypatch):
    checked = []
    monkeypatch.setattr(pipeline, "preflight", lambda job: checked.append(job.target))
    monkeypatch.setattr(pipeline, "run_held", lambda job, console, log: job.target)
    folder = tiny / "target"
    monkeypatch.setattr(hub, "target_folder", lambda t: folder if str(t) in ("cache:x", str(folder)) else t)
    job = Job(spec="eagle3-llama", target=folder, out=tmp_path / "a", draft_vocab=96, seq=48)
    assert pipeline.run(job) == folder and checked == [folder]
    checked.clear()
    job = Job(spec="eagle3-llama", target="cache:x", out=tmp_path / "b", draft_vocab=96, seq=48)
    assert pipeline.run(job) == folder and checked == ["cache:x", folder]


# run_held, its steps stubbed: what it decides between them


class FakeDraft:
    def __init__(self, taps=(2, 4, 5), vocab=258, kept=96):
        self.taps, self.target_vocab, self.kept = list(taps), vocab, torch.arange(kept)

    def to(self, device):
        return self

    def kept_ids(self):
        return self.kept


def fake_model(**kw):
    return SimpleNamespace(draft=FakeDraft(**kw), target=FakeDraft(), spec=draftsmith.load_spec("eagle3-llama"),
                           device=None)


@pytest.fixture
def stubbed(tiny, tmp_path, monkeypatch):
    """stubbed(job, meta=..., last=...) -> (lines, calls): run_held with the draft's start, self-distillation,
    extraction, the feature store, training and evaluation stubbed, each call recorded."""
    def go(job, meta=None, last=None, model=None, docs=None):
        calls = go.calls = {}
        model = model or fake_model()

        def rec(name, value):
            calls.setdefault(name, []).append(value)

        monkeypatch.setattr(pipeline, "start_fresh", lambda j, ids, log: rec("fresh", len(ids)) or model)

        def distilled(m, docs_, tok, prompt_tokens, new_tokens, log, batch, per_doc):
            rec("distill", (len(docs_), prompt_tokens, new_tokens, batch, per_doc))
            return docs or list(docs_) * 4

        monkeypatch.setattr(pipeline, "self_distilled", distilled)
        monkeypatch.setattr(pipeline, "extract_with_log",
                            lambda m, wins, feats, log, limit, bf16, target, distill: rec("extract", (feats, limit))
                            or 3)
        store_meta = meta if meta is not None else {"taps": [2, 4, 5], "seq": job.seq, "per_shard": 64,
                                                    "target": {"content": "x"}, "windows": "w"}
        monkeypatch.setattr(pipeline, "FeatureStore", lambda feats: SimpleNamespace(folder=feats, meta=store_meta))
        monkeypatch.setattr(pipeline, "store_problems", lambda *a: [])
        monkeypatch.setattr(pipeline, "labels_note", lambda *a: "labels: stubbed")
        monkeypatch.setattr(pipeline, "train", lambda m, store, out, cfg, console, log, record: rec("train", record)
                            or (last or {"step": 3, "loss": 1.5}))
        monkeypatch.setattr(pipeline, "unstated", lambda *a: None)
        monkeypatch.setattr(pipeline, "evaluate", lambda j, tok, log: rec("evaluate", True) or {})
        lines = []
        pipeline.run_held(job, None, lines.append)
        return lines, calls
    return go


def short_data(tmp_path, text="x = 1\n" * 8):
    (tmp_path / "short").mkdir(exist_ok=True)
    f = tmp_path / "short" / "a.txt"
    f.write_text(text)
    return f


def tokens(tiny, f):
    from draftsmith.assembler.assemble import read_tokenizer

    tok = read_tokenizer(tiny / "target")
    return len(D.encode(D.read_documents([f]), tok, tok.eos_token_id))


def test_data_of_exactly_one_window_is_trained_on_and_one_token_less_is_refused(job, tiny, tmp_path, stubbed):
    f = short_data(tmp_path)
    n = tokens(tiny, f)
    lines, calls = stubbed(job(tmp_path / "a", data=[f], seq=n))
    assert f"data: 1 documents, {n} tokens" in lines and calls["fresh"] == [n]
    with pytest.raises(TrainError) as e:
        stubbed(job(tmp_path / "b", data=[f], seq=n + 1))
    assert [name for name, _ in e.value.problems] == ["seq"]
    assert stubbed.calls == {}   # refused before the draft is built


def test_short_data_is_not_refused_when_self_distilling_or_reading_the_features_on_disk(job, tiny, tmp_path,
                                                                                         stubbed):
    f = short_data(tmp_path)
    n = tokens(tiny, f)
    lines, calls = stubbed(job(tmp_path / "a", data=[f], seq=n + 1, self_distill=4))
    assert calls["distill"] and calls["extract"]
    lines, calls = stubbed(job(tmp_path / "b", data=[f], seq=n + 1, max_windows=0))
    assert "extract" not in calls and calls["train"]


def test_data_without_text_names_its_zero_tokens(job, tmp_path, stubbed):
    f = short_data(tmp_path, text="")
    with pytest.raises(TrainError) as e:
        stubbed(job(tmp_path / "a", data=[f]))
    ((name, text),) = e.value.problems
    assert name == "data" and "0 tokens in all" in text


def test_features_go_to_out_features_unless_given_and_max_windows_is_the_limit(job, tmp_path, stubbed):
    out = tmp_path / "a"
    _, calls = stubbed(job(out, max_windows=1))
    assert calls["extract"] == [(out / "features", 1)]
    _, calls = stubbed(job(tmp_path / "b", features=tmp_path / "f"))
    assert calls["extract"] == [(tmp_path / "f", 24)]
    _, calls = stubbed(job(tmp_path / "c", max_windows=0, features=out / "features"))
    assert "extract" not in calls


def test_self_distillation_takes_seq_over_4_token_prompts_and_runs_only_when_extracting(job, tmp_path, stubbed):
    _, calls = stubbed(job(tmp_path / "a", self_distill=5, distill_batch=3, prompts_per_doc=2, max_windows=1))
    assert calls["distill"] == [(4, 12, 5, 3, 2)]   # 4 documents, seq 48
    _, calls = stubbed(job(tmp_path / "b"))
    assert "distill" not in calls


def test_the_run_record_holds_the_drafts_taps(job, tmp_path, stubbed):
    _, calls = stubbed(job(tmp_path / "a"), model=fake_model(taps=(1, 3)))
    assert calls["train"][0]["taps"] == [1, 3]


def test_a_resumed_run_says_so_with_the_note(job, tmp_path, stubbed, monkeypatch):
    out = tmp_path / "a"
    out.mkdir()
    (out / STATE).write_bytes(b"")
    model = fake_model()
    monkeypatch.setattr(draftsmith, "assemble", lambda spec, target, draft: model)
    monkeypatch.setattr(pipeline, "resume_note", lambda j, m: "; NOTE")
    lines, calls = stubbed(job(out, from_draft=tmp_path / "elsewhere"), model=model)
    assert f"resuming the draft in {out} (--from-draft starts a new run only); NOTE" in lines
    assert "fresh" not in calls
    lines, _ = stubbed(job(out), model=model)
    assert f"resuming the draft in {out}; NOTE" in lines


UNCHECKED = "does not record the target and windows they were made from"
NAME_SIZE = "records the target's weight files by name and size only"


@pytest.mark.parametrize("source, unchecked, name_size", [
    ({}, True, False),
    ({"windows": "w"}, False, False),
    ({"target": {"content": "c"}}, False, False),
    ({"target": {"hidden": 64}}, False, True),
])
def test_what_the_features_do_not_record_is_said(job, tmp_path, stubbed, source, unchecked, name_size):
    meta = {"taps": [2, 4, 5], "seq": 48, "per_shard": 64, **source}
    lines, _ = stubbed(job(tmp_path / "a"), meta=meta)
    assert any(UNCHECKED in line for line in lines) == unchecked
    assert any(NAME_SIZE in line for line in lines) == name_size


def test_a_run_with_no_step_left_says_so_and_one_that_trained_gives_its_loss(job, tmp_path, stubbed):
    lines, _ = stubbed(job(tmp_path / "a"), last={"step": 12, "loss": None})
    assert any("is already at step 12 of --steps 12: nothing to train" in line for line in lines)
    assert not any(line.startswith("trained to") for line in lines)
    lines, _ = stubbed(job(tmp_path / "b"), last={"step": 7, "loss": 0.25})
    assert "trained to step 7: loss 0.250" in lines


# source_check, store_problems, labels_note


def test_source_check_extracts_windows_unless_max_windows_0_or_before_self_distillation(job, tmp_path):
    ids = torch.arange(400) % 50
    assert pipeline.source_check(job(tmp_path, max_windows=0), tmp_path, ids, None) is None
    wins = pipeline.source_check(job(tmp_path, max_windows=1), tmp_path, ids, None)
    assert torch.equal(wins, D.windows(ids, 48, seed=0))
    assert pipeline.source_check(job(tmp_path), tmp_path, ids, {"any": 1}) is None


def problems(tmp_path, taps, seq, ttt):
    store = SimpleNamespace(folder=tmp_path, meta={"taps": [2, 4, 5], "seq": seq, "per_shard": 64})
    j = SimpleNamespace(seq=seq, config=SimpleNamespace(ttt=ttt, bf16=True))
    return pipeline.store_problems(store, fake_model(taps=taps), j, {})


def test_store_problems_take_windows_of_ttt_plus_1_tokens_and_the_drafts_taps(tmp_path):
    assert problems(tmp_path, (2, 4, 5), 4, 3) == []
    assert problems(tmp_path, (2, 4, 5), 3, 3) == [
        ("ttt", f"3: the features in {tmp_path} are of 3-token windows, which allow --ttt 2 at most (a window holds "
                "ttt + 1 tokens)")]
    ((name, why),) = problems(tmp_path, (1, 3), 4, 3)
    assert name == "features" and "holds features for" in why


def test_labels_note_gives_the_share_and_refuses_none(tmp_path):
    seen = []
    store = SimpleNamespace(folder=tmp_path, labels_in=lambda kept, ttt: seen.append(ttt) or (3, 8))
    assert pipeline.labels_note(store, fake_model(), tmp_path, 2) == (
        "labels: 3 of 8 positions (37.5%) have the target's next token in the draft vocabulary; the loss counts "
        "those")
    assert seen == [2]
    store.labels_in = lambda kept, ttt: (0, 8)
    with pytest.raises(TrainError, match="none of the 8 target next tokens"):
        pipeline.labels_note(store, fake_model(), tmp_path)


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
