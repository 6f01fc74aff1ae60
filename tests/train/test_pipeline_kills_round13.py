"""Mutation round 13 (train/pipeline.py): the edges its surviving mutants showed untested, each pinned without a
real training run (the steps around it stubbed). Job's defaults are the command line's; the reduced vocabulary
keeps the most frequent ids, lower ids first among equal counts, and none at or past the target's size;
self-distillation decodes every prompt, 16 to a batch and one per document by default; ``run`` checks a cached
target's folder again and a plain folder once; ``run_held`` refuses data shorter than a window unless it
self-distils or reads only the features on disk, names the tokens of data that gave no text, extracts into
out/features, self-distils seq // 4-token prompts only when it extracts, records the draft's taps, says what the
features do not record and whether a step was run; ``source_check``, ``store_problems`` (a window holds ttt + 1
tokens) and ``labels_note`` each say what they should at their edges. The round's tests of the notes, ``start``,
the chat rendering and ``evaluate``: test_pipeline_notes_kills_round13.py."""
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
