"""Mutation round 11c on train/preflight.py (with the target, context and data checks it runs): preflight takes the
spec's checkpoints.target, a cached target name, the context to its last token and the vocabulary rules of a fresh
draft only; every path in a refusal is whole up to 300 characters, a chat template's reason is cut past 200 and lists
are cut at three names of 120. The round's other train tests: test_kills_round11.py, test_limits_kills_round11.py."""
from types import SimpleNamespace

import pytest

from draftsmith.train.checks import TrainError
from draftsmith.train.loop import STATE

from test_kills_round11 import path_of, shown   # a path of a given length, and a path as the messages show it


# preflight.py


def spec_file(tmp_path, name: str = "mine", vocab: str = "reduced: auto, d2t: offset", target=None):
    """eagle3-llama as a file named ``name``, with ``draft.vocab: {vocab}`` and a checkpoints.target."""
    from draftsmith.specs.loader import load_spec

    text = open(load_spec("eagle3-llama").source).read().replace("name: eagle3-llama", f"name: {name}")
    text = text.replace("vocab: {reduced: auto, d2t: offset}", f"vocab: {{{vocab}}}")
    if target is not None:
        text += f"checkpoints: {{target: '{target}'}}\n"
    (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path / f"{name}.yaml"


def test_without_a_target_the_specs_checkpoints_target_is_taken(job, tiny, tmp_path):
    from draftsmith.train.preflight import preflight

    j = job(tmp_path / "out", target=None, spec=spec_file(tmp_path, target=tiny / "target"))
    preflight(j)
    assert j.target == tiny / "target"


def test_without_a_target_a_spec_naming_none_is_refused_naming_the_target(job, tmp_path):
    from draftsmith.train.preflight import preflight

    with pytest.raises(TrainError) as e:
        preflight(job(tmp_path / "out", target=None))
    assert e.value.problems == [("target", "not given, and spec 'eagle3-llama' names no checkpoints.target: give a "
                                           "Hugging Face folder, or 'smollm2'")]


@pytest.mark.parametrize("name", ["smollm2", "cache:smollm2"])
def test_a_cached_target_name_is_not_taken_for_a_missing_folder(tmp_path, monkeypatch, name):
    """The command line fetches a cached target, then preflight runs again on its folder."""
    from draftsmith.train.target_checks import target_problems

    monkeypatch.chdir(tmp_path)
    assert target_problems(SimpleNamespace(target=name)) == []
    assert target_problems(SimpleNamespace(target="smollm3")) == [("target", "folder smollm3 does not exist")]


@pytest.mark.parametrize("start", ["from_draft", "resume"])
def test_a_draft_vocab_is_checked_against_the_spec_only_for_a_fresh_draft(tiny, tmp_path, start):
    """--from-draft and a resumed run bring their own vocabulary: --draft-vocab 0 with a spec that says
    reduced: true is refused for a fresh draft only."""
    from draftsmith.specs.loader import load_spec
    from draftsmith.train.preflight import vocab_problems

    spec, out = load_spec(spec_file(tmp_path, vocab="reduced: true")), tmp_path / "out"
    fresh = SimpleNamespace(eval_only=False, from_draft=None, out=out, target=tiny / "target", draft_vocab=None)
    assert [name for name, _ in vocab_problems(fresh, spec)] == ["draft_vocab"]
    if start == "resume":
        out.mkdir()
        (out / STATE).write_bytes(b"")
        assert vocab_problems(fresh, spec) == []
    else:
        assert vocab_problems(SimpleNamespace(**{**vars(fresh), "from_draft": tmp_path / "d"}), spec) == []



def test_a_spec_of_the_full_vocabulary_takes_a_draft_vocab_of_the_targets_size_or_of_a_target_not_read(tiny, tmp_path):
    """reduced: false refuses a --draft-vocab below the target's vocabulary (258 tokens) only: one of its size is
    the full vocabulary, and a target not on disk yet (a cached name) is checked once fetched."""
    from draftsmith.specs.loader import load_spec
    from draftsmith.train.preflight import vocab_problems

    spec = load_spec(spec_file(tmp_path, vocab="reduced: false"))
    fresh = SimpleNamespace(eval_only=False, from_draft=None, out=tmp_path / "out", target=tiny / "target")
    assert vocab_problems(SimpleNamespace(**vars(fresh), draft_vocab=258), spec) == []
    below = vocab_problems(SimpleNamespace(**vars(fresh), draft_vocab=257), spec)
    assert [name for name, _ in below] == ["draft_vocab"]
    assert vocab_problems(SimpleNamespace(**{**vars(fresh), "target": "cache:smollm2"}, draft_vocab=96), spec) == []


def test_a_reduced_vocabulary_below_the_topk_is_refused_whether_the_targets_is_known_or_not():
    from draftsmith.specs.loader import load_spec
    from draftsmith.train.preflight import topk_problems

    spec = load_spec("eagle3-llama")   # topk 4
    ((field, text),) = topk_problems(2, None, spec)
    assert field == "draft_vocab" and text.startswith("2: allowed 0 (the target's whole vocabulary) or at least 4")
    assert topk_problems(2, 258, spec) == topk_problems(2, None, spec)
    assert topk_problems(3, 3, spec) == []      # the target's whole vocabulary of 3 tokens: nothing reduced
    assert topk_problems(4, None, spec) == topk_problems(4, 258, spec) == topk_problems(0, 258, spec) == []


def test_self_distilled_continuations_fill_the_context_but_the_last_new_token_is_never_fed():
    from draftsmith.train.target_checks import context_problems

    assert context_problems(context_job(seq=64, self_distill=49), 64, "here") == []      # 16 + 49 - 1 = 64
    assert context_problems(context_job(seq=64, self_distill=50), 64, "here") == [
        ("self_distill", "50: allowed up to 49 with --seq 64: its 16-token prompts and the new tokens (the last one "
                         "never fed) fit the target's context of 64 (here)")]
    assert context_problems(context_job(seq=64, self_distill=50, eval_only=True), 64, "here") == []

def test_a_spec_of_a_reduced_vocabulary_refuses_a_draft_vocab_of_the_targets_whole_size(tiny, tmp_path):
    from draftsmith.specs.loader import load_spec
    from draftsmith.train.preflight import vocab_problems

    spec = load_spec(spec_file(tmp_path, vocab="reduced: true"))
    fresh = SimpleNamespace(eval_only=False, from_draft=None, out=tmp_path / "out", target=tiny / "target")
    ((field, text),) = vocab_problems(SimpleNamespace(**vars(fresh), draft_vocab=258), spec)
    assert field == "draft_vocab" and text.startswith("258: spec mine says draft.vocab.reduced: true")
    assert "give a --draft-vocab below the target's 258" in text
    assert vocab_problems(SimpleNamespace(**vars(fresh), draft_vocab=257), spec) == []


@pytest.mark.parametrize("n", [300, 301])
def test_a_missing_target_folder_is_named_whole_up_to_300_characters(tmp_path, n):
    from draftsmith.train.target_checks import target_problems

    target = path_of(tmp_path, n)
    assert target_problems(SimpleNamespace(target=target)) == [("target", f"folder {shown(target)} does not exist")]


@pytest.mark.parametrize("n", [200, 201])
def test_why_the_chat_template_refused_a_record_is_cut_past_200_characters(n):
    from draftsmith.train import records as R
    from draftsmith.train.data_checks import skipped_note

    refused = R.Refused("a.jsonl:3")
    refused.why = "w" * n
    why = refused.why if n <= 200 else "w" * 98 + "..." + "w" * 98
    assert skipped_note([], [refused]) == f", 1 chat record the chat template refused skipped ({why}): a.jsonl:3"


def test_skipped_files_and_records_are_listed_three_at_most_each_cut_past_120_characters():
    from pathlib import Path

    from draftsmith.train import records as R
    from draftsmith.train.data_checks import skipped_note

    names = ["a" * 120, "b" * 121, "c", "d"]
    listed = f"{'a' * 120}, {'b' * 58}...{'b' * 58}, c and 1 more"
    assert skipped_note([Path(n) for n in names]) == f", 4 files skipped (not UTF-8 text): {listed}"
    assert skipped_note([], names) == (", 4 records without text skipped (no text, prompt, completion, messages or "
                                       f"conversations field, or an empty one): {listed}")
    refused = [R.Refused(n) for n in names]
    for r in refused:
        r.why = "bad"
    assert skipped_note([], refused) == f", 4 chat records the chat template refused skipped (bad, ...): {listed}"


def test_one_chat_record_refused_is_said_with_its_reason_and_two_with_the_first_and_more():
    from draftsmith.train import records as R
    from draftsmith.train.data_checks import skipped_note

    refused = [R.Refused("a.jsonl:1"), R.Refused("a.jsonl:2")]
    for r in refused:
        r.why = "bad"
    assert skipped_note([], refused[:1]) == ", 1 chat record the chat template refused skipped (bad): a.jsonl:1"
    assert skipped_note([], refused) == (", 2 chat records the chat template refused skipped (bad, ...): a.jsonl:1, "
                                         "a.jsonl:2")


def test_a_data_path_that_cannot_be_looked_up_is_said_with_the_systems_reason_alone(tmp_path):
    from draftsmith.train.preflight import path_problem

    assert path_problem(tmp_path / ("x" * 300)) == "cannot be read (File name too long)"
    assert path_problem(tmp_path / "none") == "no such file or folder"


@pytest.mark.parametrize("n", [300, 301])
def test_the_targets_config_is_named_whole_up_to_300_characters_where_its_context_is_too_short(tmp_path, n):
    import json

    from draftsmith.train.target_checks import target_problems

    config = path_of(tmp_path, n)
    target = config.parent / config.name[: -len("config.json") - 1]
    config = target / "config.json"
    target.mkdir(parents=True)
    config.write_text(json.dumps({"max_position_embeddings": 16}))
    (target / "tokenizer.json").write_text("{}")
    assert len(str(config)) == n
    job = SimpleNamespace(target=target, seq=48, eval_only=False, self_distill=0, held_out=[], eval_prompts=0,
                          chat=False)
    assert target_problems(job) == [
        ("seq", f"48: allowed an integer up to 16, the target's context (max_position_embeddings in {shown(config)})")]


@pytest.mark.parametrize("n", [300, 301])
def test_an_out_folder_holding_a_draft_is_named_whole_up_to_300_characters_with_the_way_to_train_on(tiny, tmp_path,
                                                                                                    n):
    from draftsmith.testing import write_eagle3
    from draftsmith.train.preflight import out_problems

    out = path_of(tmp_path, n)
    write_eagle3(out, tiny / "target")
    ((field, text),) = out_problems(SimpleNamespace(out=out, features=None, target=tiny / "target"))
    assert field == "out" and text.startswith(f"{shown(out)} holds ")
    assert text.endswith(f"give a new or empty --out, or --from-draft {shown(out)} with a new --out to train on "
                         "from the draft it holds")


@pytest.mark.parametrize("n", [300, 301])
def test_preflight_names_a_missing_data_path_and_an_out_that_is_a_file_whole_up_to_300_characters(job, tmp_path, n):
    from draftsmith.train.preflight import preflight

    missing, afile = path_of(tmp_path / "d", n), path_of(tmp_path / "o", n)
    afile.parent.mkdir(parents=True)
    afile.write_text("not a folder")
    with pytest.raises(TrainError) as e:
        preflight(job(afile, data=[missing]))
    assert e.value.problems == [("data", f"{shown(missing)}: no such file or folder"),
                                ("out", f"{shown(afile)}: is not a folder")]


@pytest.mark.parametrize("n", [300, 301])
def test_preflight_names_a_trainer_pt_that_is_no_archive_whole_up_to_300_characters(job, tmp_path, n):
    from draftsmith.train.loop import FRESH
    from draftsmith.train.preflight import preflight

    out = path_of(tmp_path, n - len(STATE) - 1)
    out.mkdir(parents=True)
    (out / STATE).write_text("not a torch.save archive")
    with pytest.raises(TrainError) as e:
        preflight(job(out))
    said = f"{shown(out / STATE)} is not a trainer state (not a torch.save archive); {FRESH}"
    assert e.value.problems == [("", said)]


@pytest.mark.parametrize("n", [300, 301])
def test_a_from_draft_folder_without_a_draft_is_named_whole_up_to_300_characters(tmp_path, n):
    from draftsmith.specs.loader import load_spec
    from draftsmith.train.preflight import NO_DRAFT, from_draft_problems

    folder = path_of(tmp_path, n)
    job = SimpleNamespace(from_draft=folder, eval_only=False)
    assert from_draft_problems(job, load_spec("eagle3-llama"), True) == [("from_draft", f"{shown(folder)}: no such "
                                                                                       "folder")]
    folder.mkdir(parents=True)   # there, but without a draft
    assert from_draft_problems(job, load_spec("eagle3-llama"), True) == [("from_draft", f"{shown(folder)} {NO_DRAFT}")]


@pytest.mark.parametrize("n", [300, 301])
def test_a_from_draft_the_spec_cannot_load_names_both_folders_whole_up_to_300_characters(tiny, tmp_path, n):
    """The target folder itself given as --from-draft: planned, and refused naming it and the target."""
    import shutil

    from draftsmith.specs.loader import load_spec
    from draftsmith.train.preflight import from_draft_problems

    target = path_of(tmp_path, n)
    shutil.copytree(tiny / "target", target)
    job = SimpleNamespace(from_draft=target, eval_only=False, target=target, out=tmp_path / "out")
    ((field, text),) = from_draft_problems(job, load_spec("eagle3-llama"), True)
    assert field == "from_draft"
    assert text.startswith(f"{shown(target)} is not a draft spec eagle3-llama loads onto the target {shown(target)}: ")


@pytest.mark.parametrize("n", [300, 301])
def test_eval_only_names_an_out_without_a_draft_whole_up_to_300_characters(job, tmp_path, n):
    from draftsmith.train.preflight import NO_DRAFT, preflight

    out = path_of(tmp_path, n)
    out.mkdir(parents=True)
    with pytest.raises(TrainError) as e:
        preflight(job(out, eval_only=True, eval_prompts=1))
    assert e.value.problems == [("out", f"{shown(out)} {NO_DRAFT}: train one first, without --eval-only")]


def context_job(**kw):
    return SimpleNamespace(**{"eval_only": False, "seq": 48, "self_distill": 0, "held_out": [], "eval_prompts": 0,
                              "eval_prompt_tokens": 128, "eval_new_tokens": 64, **kw})


def test_a_window_of_the_whole_context_is_taken_and_one_token_more_is_refused():
    from draftsmith.train.target_checks import context_problems

    assert context_problems(context_job(seq=64), 64, "here") == []
    assert context_problems(context_job(seq=65), 64, "here") == [
        ("seq", "65: allowed an integer up to 64, the target's context (here)")]


def test_held_out_prompts_fill_the_context_but_the_last_new_token_is_never_fed():
    from draftsmith.train.target_checks import context_problems

    fits = context_job(held_out=["h.txt"], eval_prompts=2, eval_prompt_tokens=40, eval_new_tokens=25)
    assert context_problems(fits, 64, "here") == []                                       # 40 + 25 - 1 = 64
    ((field, text),) = context_problems(context_job(**{**vars(fits), "eval_new_tokens": 26}), 64, "here")
    assert field == "eval_prompts" and text.startswith("2: held-out prompts of 40 tokens and 26 new tokens each")
