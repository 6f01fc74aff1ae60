"""Mutation round 11c (train/preflight.py, train/resume.py, train/checks.py, train/feature_checks.py, limits.py): the
edges its surviving mutants showed untested. TrainConfig and Job refuse a bool or a float where an integer is asked,
a rate or decay of 0 or infinity, a seed outside 0..2**32 - 1 and each Job count one below its bound, naming the
field and the bound; a window's least length follows ttt and self-distillation; a FIFO where trainer.pt should be is
not opened; a features folder that records windows but holds no shard is refused with --max-windows 0; a link loop
in it is named; preflight takes the spec's checkpoints.target, a cached target name, the context to its last token
and the vocabulary rules of a fresh draft only; every path in a refusal is whole up to 300 characters and lists are
cut at three names of 120; and each bound the README states (limits.py) is enforced at its edge and named."""
import math
import os
import threading
from types import SimpleNamespace

import pytest

from draftsmith.testing import LastMessageTokenizer
from draftsmith.train import Job, TrainConfig
from draftsmith.train.checks import TrainError
from draftsmith.train.loop import STATE


def refusal(make, **kw) -> list[tuple[str, str]]:
    with pytest.raises(TrainError) as e:
        make(**kw)
    return e.value.problems


# checks.py: TrainConfig's bounds


@pytest.mark.parametrize("field, value", [("steps", True), ("batch", 2.5), ("ttt", False), ("save_every", 4.0)])
def test_an_integer_field_refuses_a_bool_or_a_float(field, value):
    assert refusal(TrainConfig, **{field: value}) == [(field, f"{value!r}: allowed an integer >= 1")]


@pytest.mark.parametrize("field", ["lr", "decay"])
@pytest.mark.parametrize("value", [True, 0, 0.0, -1.0, math.inf])
def test_a_rate_or_decay_refuses_a_bool_zero_or_less_or_infinity(field, value):
    assert refusal(TrainConfig, **{field: value}) == [(field, f"{value!r}: allowed a finite number > 0")]


@pytest.mark.parametrize("field", ["lr", "decay"])
def test_a_rate_or_decay_takes_any_small_positive_number(field):
    assert getattr(TrainConfig(**{field: 1e-9}), field) == 1e-9
    assert getattr(TrainConfig(**{field: 2}), field) == 2


@pytest.mark.parametrize("seed", [-1, 2**32, True, 1.0])
def test_a_seed_outside_0_to_2_32_is_refused(seed):
    assert refusal(TrainConfig, seed=seed) == [("seed", f"{seed!r}: allowed an integer from 0 to 2**32 - 1")]


def test_a_seed_of_0_or_2_32_minus_1_is_taken():
    assert TrainConfig(seed=0).seed == 0 and TrainConfig(seed=2**32 - 1).seed == 2**32 - 1


# checks.py: Job's bounds


def job(**kw) -> Job:
    return Job(spec="eagle3-llama", target=None, out="out", **kw)


@pytest.mark.parametrize("field, low", [("distill_batch", 1), ("eval_prompts", 0), ("eval_prompt_tokens", 1),
                                        ("eval_new_tokens", 1), ("prompts_per_doc", 1), ("self_distill", 0)])
def test_each_job_count_is_refused_one_below_its_bound_and_taken_at_it(field, low):
    assert getattr(job(**{field: low}), field) == low
    ((name, text),) = refusal(job, **{field: low - 1})
    assert name == field and text.startswith(f"{low - 1}: allowed an integer >= {low}")


@pytest.mark.parametrize("field", ["distill_batch", "eval_prompts", "eval_new_tokens"])
def test_a_job_count_refuses_a_bool_or_a_float(field):
    assert [name for name, _ in refusal(job, **{field: True})] == [field]
    assert [name for name, _ in refusal(job, **{field: 8.0})] == [field]


def test_a_window_holds_ttt_plus_1_tokens_and_4_when_self_distilling():
    one = TrainConfig(ttt=1)
    assert job(seq=2, config=one).seq == 2                           # ttt + 1 = 2
    assert refusal(job, seq=1, config=one) == [("seq", "1: allowed an integer >= 2 (ttt + 1)")]
    assert job(seq=4, self_distill=1, config=one).seq == 4           # its prompts are seq // 4 >= 1 tokens
    assert refusal(job, seq=3, self_distill=1, config=one) == [
        ("seq", "3: allowed an integer >= 4 (ttt + 1, and 4 to self-distill)")]
    assert job(seq=6, self_distill=1, config=TrainConfig(ttt=5)).seq == 6   # ttt + 1 above 4: it rules
    assert refusal(job, seq=5, self_distill=1, config=TrainConfig(ttt=5)) == [
        ("seq", "5: allowed an integer >= 6 (ttt + 1, and 4 to self-distill)")]


# resume.py


def test_a_fifo_where_trainer_pt_should_be_is_no_trainer_state_and_is_not_opened(tmp_path):
    """Opening a FIFO blocks until something writes to it: saved_state (which resume_problems reads) must tell it
    is no regular file first and answer None at once."""
    from draftsmith.train.resume import saved_state

    os.mkfifo(tmp_path / STATE)
    said = []
    reader = threading.Thread(target=lambda: said.append(saved_state(tmp_path)), daemon=True)
    reader.start()
    reader.join(3)
    if reader.is_alive():   # blocked in open(): give it a writer that closes at once, then fail
        os.close(os.open(tmp_path / STATE, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(3)
        pytest.fail("saved_state opened the FIFO in place of trainer.pt and blocked")
    assert said == [None]


# feature_checks.py


def shown(path) -> str:
    """A path as the messages show it: whole up to 300 characters, else cut in the middle to 299."""
    path = str(path)
    return path if len(path) <= 300 else path[:148] + "..." + path[-148:]


def path_of(base, n: int):
    """A path under ``base`` exactly ``n`` characters long (parts under the 255-character name limit)."""
    pad = n - len(str(base)) - 2
    path = base / ("a" * (pad // 2)) / ("b" * (pad - pad // 2))
    assert len(str(path)) == n
    return path


def features_job(tmp_path, feats, **kw):
    return SimpleNamespace(**{"features": feats, "out": tmp_path / "out", "max_windows": None, "seq": 48,
                              "target": tmp_path / "no-target", "config": SimpleNamespace(bf16=True), **kw})


def write_meta(feats, seq: int = 48) -> None:
    import json

    feats.mkdir(parents=True, exist_ok=True)
    (feats / "features.json").write_text(json.dumps({"taps": [1, 2, 3], "seq": seq, "per_shard": 16}))


def feature_problems(tmp_path, feats, **kw):
    from draftsmith.train.feature_checks import feature_problems

    return feature_problems(features_job(tmp_path, feats, **kw))


def test_max_windows_0_is_refused_with_no_shard_even_where_features_json_is(tmp_path):
    """0 trains on the features on disk alone: a features.json without a shard holds none."""
    feats = tmp_path / "feats"
    write_meta(feats)
    assert feature_problems(tmp_path, feats, max_windows=0) == [
        ("max_windows", f"0: no features in {feats} to train on (0 uses only the features already on disk)")]
    assert feature_problems(tmp_path, feats, max_windows=1) == []


@pytest.mark.parametrize("made", [False, True])
def test_max_windows_0_is_refused_on_a_new_features_folder_and_1_is_not(tmp_path, made):
    feats = tmp_path / "feats"
    if made:
        feats.mkdir()
    ((field, text),) = feature_problems(tmp_path, feats, max_windows=0)
    assert field == "max_windows" and text.startswith(f"0: no features in {feats} to train on")
    assert feature_problems(tmp_path, feats, max_windows=1) == []
    assert feature_problems(tmp_path, feats, max_windows=None) == []


def test_a_link_loop_in_the_features_folder_is_named_as_foreign(tmp_path):
    """A link whose target cannot be resolved (a loop) is no folder draftsmith writes: named, not set aside as if
    it were --out."""
    feats = tmp_path / "feats"
    feats.mkdir()
    (feats / "loop").symlink_to(feats / "loop")
    ((field, text),) = feature_problems(tmp_path, feats)
    assert field == "features" and text.startswith(f"{feats} holds loop, which no extraction wrote")


def test_foreign_names_are_listed_three_at_most_each_cut_past_120_characters(tmp_path):
    feats = tmp_path / "feats"
    feats.mkdir()
    names = ["a" * 120, "b" * 121, "c.txt", "d.txt"]
    for name in names:
        (feats / name).write_text("mine")
    ((_, text),) = feature_problems(tmp_path, feats)
    assert text.startswith(f"{feats} holds {'a' * 120}, {'b' * 58}...{'b' * 58}, c.txt and 1 more, which no "
                           "extraction wrote")


def test_shards_without_features_json_are_listed_three_at_most_each_cut_past_80_characters(tmp_path):
    feats = tmp_path / "feats"
    feats.mkdir()
    names = [f"shard-{c * n}.safetensors" for c, n in (("a", 62), ("b", 63), ("c", 1), ("d", 1))]
    assert [len(n) for n in names[:2]] == [80, 81]
    for name in names:
        (feats / name).write_bytes(b"")
    ((_, text),) = feature_problems(tmp_path, feats)
    cut = names[1][:38] + "..." + names[1][-38:]
    assert text.startswith(f"{feats} holds 4 feature shards ({names[0]}, {cut}, {names[2]} and 1 more) but no "
                           "features.json")


@pytest.mark.parametrize("n", [300, 301])
def test_the_features_folder_is_named_whole_up_to_300_characters_in_each_refusal(tmp_path, n):
    feats = path_of(tmp_path, n)
    feats.parent.mkdir()
    feats.write_text("a file")                                        # not a folder
    assert feature_problems(tmp_path, feats) == [("features", f"{shown(feats)}: is not a folder")]
    feats.unlink()
    feats.mkdir()
    (feats / "notes.txt").write_text("mine")                          # the user's own
    ((_, text),) = feature_problems(tmp_path, feats)
    assert text.startswith(f"{shown(feats)} holds notes.txt, which")
    (feats / "notes.txt").unlink()
    (feats / "shard-00000.safetensors").write_bytes(b"")              # a shard, no features.json
    ((_, text),) = feature_problems(tmp_path, feats)
    assert text.startswith(f"{shown(feats)} holds 1 feature shard (shard-00000.safetensors) but no")
    (feats / "shard-00000.safetensors").unlink()
    assert feature_problems(tmp_path, feats, max_windows=0) == [   # nothing to train on
        ("max_windows", f"0: no features in {shown(feats)} to train on (0 uses only the features already on disk)")]
    write_meta(feats, seq=64)                                         # windows of another length
    assert feature_problems(tmp_path, feats) == [
        ("seq", f"48: {shown(feats)} holds features of 64-token windows; give seq 64 to resume, or another "
                "features folder")]


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


# limits.py: each bound the README states, enforced at its edge and named in the refusal


def eagle3_yaml(name: str = "edge") -> str:
    import draftsmith

    return open(draftsmith.load_spec("eagle3-llama").source).read().replace("name: eagle3-llama", f"name: {name}")


def spec_refusal(text: str, tmp_path) -> str:
    import draftsmith
    from draftsmith.errors import SpecError

    (tmp_path / "edge.yaml").write_text(text)
    with pytest.raises(SpecError) as e:
        draftsmith.load_spec(tmp_path / "edge.yaml")
    return " ".join(str(e.value).split())


def test_a_spec_of_more_than_20000_values_is_refused_naming_the_bound(tmp_path):
    text = eagle3_yaml() + "extra: [" + ",".join(["0"] * 21000) + "]\n"
    assert "more than 20000 values by line" in spec_refusal(text, tmp_path)


def test_a_description_of_2000_characters_is_taken_and_one_more_is_refused():
    import draftsmith
    import yaml
    from draftsmith.errors import SpecError

    raw = yaml.safe_load(eagle3_yaml())
    assert len(draftsmith.parse_spec({**raw, "description": "x" * 2000}).description) == 2000
    with pytest.raises(SpecError, match="at most 2000 characters"):
        draftsmith.parse_spec({**raw, "description": "x" * 2001})


def nested(levels: int) -> dict:
    value = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def test_a_checkpoint_json_64_levels_deep_is_read_and_65_is_refused(tmp_path):
    import json

    from draftsmith.assembler.checkpoint import read_json
    from draftsmith.errors import CheckpointError

    (tmp_path / "config.json").write_text(json.dumps(nested(64)))
    assert read_json(tmp_path / "config.json") == nested(64)
    (tmp_path / "config.json").write_text(json.dumps(nested(65)))
    with pytest.raises(CheckpointError, match="nested deeper than 64 levels"):
        read_json(tmp_path / "config.json")


@pytest.mark.parametrize("key, most", [("num_hidden_layers", 1024), ("hidden_size", 1 << 20),
                                       ("vocab_size", 1 << 23)])
def test_a_config_size_at_its_bound_is_taken_and_one_more_is_refused_naming_it(key, most):
    from draftsmith.assembler.config_values import config_problems

    assert config_problems({key: most}) == []
    assert config_problems({key: most + 1}) == [f"{key} is {most + 1}; allowed 1..{most} (draftsmith/limits.py)"]


@pytest.mark.parametrize("decoding, key, most", [
    ({"steps": 64}, "steps", 64), ({"topk": 64, "steps": 64, "draft_tokens": 1024}, "draft_tokens", 1024),
    ({"page_size": 4096}, "page_size", 4096)])
def test_a_decoding_setting_at_its_bound_is_taken_and_one_more_is_refused_naming_it(decoding, key, most):
    import draftsmith
    import yaml
    from draftsmith.errors import SpecError

    raw = yaml.safe_load(eagle3_yaml())
    spec = draftsmith.parse_spec({**raw, "decoding": {**raw["decoding"], **decoding}})
    assert getattr(spec.decoding, key) == most
    with pytest.raises(SpecError) as e:
        draftsmith.parse_spec({**raw, "decoding": {**raw["decoding"], **decoding, key: most + 1}})
    assert " ".join(str(e.value).split()).endswith(f"decoding.{key}: {most + 1} is not allowed allowed: an integer "
                                                   f"<= {most}")


def test_a_batch_of_4096_prompts_is_taken_and_4097_are_refused_naming_the_bound():
    from draftsmith.decoding.prompts import encode_prompts

    problems = []
    ids, _ = encode_prompts([[1]] * 4096, tokenizer=None, vocab=10, context=None, problems=problems)
    assert len(ids) == 4096 and problems == []
    encode_prompts([[1]] * 4097, tokenizer=None, vocab=10, context=None, problems=problems)
    assert problems == ["prompt: a batch of 4097 prompts; at most 4096 in one call"]


def test_a_spec_file_of_64_kib_loads_and_one_byte_more_is_refused_naming_the_bound(tmp_path):
    import draftsmith

    text = eagle3_yaml() + "# padding\n"
    text += "#" * (64 * 1024 - len(text.encode()) - 1) + "\n"
    (tmp_path / "edge.yaml").write_text(text)
    assert (tmp_path / "edge.yaml").stat().st_size == 65536
    assert draftsmith.load_spec(tmp_path / "edge.yaml").name == "edge"
    said = spec_refusal(text + "\n", tmp_path)
    assert "the file is 65537 bytes; a spec is at most 65536 bytes (draftsmith/limits.py)" in said


def test_a_checkpoint_json_of_16_mib_is_read_and_one_byte_more_is_refused_naming_the_bound(tmp_path):
    from draftsmith.assembler.checkpoint import read_json
    from draftsmith.errors import CheckpointError

    head = b'{"a": "'
    (tmp_path / "config.json").write_bytes(head + b"x" * (16 * 1024 * 1024 - len(head) - 2) + b'"}')
    assert len(read_json(tmp_path / "config.json")["a"]) == 16 * 1024 * 1024 - 9
    with open(tmp_path / "config.json", "ab") as f:
        f.write(b" ")
    with pytest.raises(CheckpointError, match="16777217 bytes; a JSON file here is at most 16777216 bytes"):
        read_json(tmp_path / "config.json")


def test_a_weight_rule_pattern_of_1000_characters_is_taken_and_one_more_is_refused_naming_the_bound():
    from draftsmith.components.weights import pattern_problem

    assert pattern_problem("a" * 1000) is None
    assert pattern_problem("a" * 1001) == "a pattern of 1001 characters; at most 1000"


def test_max_new_tokens_of_2_20_is_taken_and_one_more_is_refused_naming_the_bound():
    from draftsmith.decoding.arguments import settings_problems

    assert settings_problems(1 << 20, 0, 1.0, 0, None, None, vocab=32) == []
    assert settings_problems((1 << 20) + 1, 0, 1.0, 0, None, None, vocab=32) == [
        "max_new_tokens is 1048577; an integer in 1..1048576 is expected"]


def conversation_problems(prompt) -> tuple[list, list[str]]:
    from draftsmith.decoding.prompts import encode_prompts

    said: list[str] = []
    ids, _ = encode_prompts(prompt, tokenizer=LastMessageTokenizer(), vocab=32, context=None, problems=said)
    return ids, said


def test_a_conversation_of_65536_messages_is_read_and_one_more_is_refused_by_its_count():
    one = {"role": "user", "content": "x"}
    _, said = conversation_problems([one] * 65536)      # read, then refused for the values they hold (5 each)
    assert len(said) == 1 and said[0].startswith("prompt: a conversation that holds more than 131072 values")
    _, said = conversation_problems([one] * 65537)
    assert said == ["prompt: a conversation of 65537 messages; at most 65536 are read (its tokens must also fit the "
                    "target's context once rendered)"]


def test_a_conversation_of_131072_values_is_read_and_one_more_is_refused():
    """The list, the message, its 3 keys, 2 strings and a list of n strings (1 + n) are 8 + n values."""
    talk = [{"role": "user", "content": "abc", "extra": ["v"] * (131072 - 8)}]
    assert conversation_problems(talk) == ([[1, 2, 3]], [])
    ids, said = conversation_problems([{**talk[0], "extra": ["v"] * (131072 - 7)}])
    assert ids == [] and len(said) == 1 and "holds more than 131072 values as its template writes them" in said[0]


def test_a_checkpoint_listing_2_20_tensors_is_taken_and_one_more_is_refused_naming_the_bound(tmp_path):
    """The count a header or index states is checked before a name is read (a header of 2^20 names is ~50 MB to
    write, so the check is called with the count alone)."""
    from draftsmith.assembler.weight_files import check_names
    from draftsmith.errors import CheckpointError

    check_names(tmp_path / "model.safetensors", [], 1 << 20)
    with pytest.raises(CheckpointError, match="lists 1048577 tensors; a checkpoint here holds at most 1048576 "):
        check_names(tmp_path / "model.safetensors", [], (1 << 20) + 1)


def test_a_probe_file_of_1_mib_is_read_and_one_byte_more_is_refused_naming_the_bound(tmp_path):
    from draftsmith.cli.doctor import _probe_file
    from draftsmith.errors import OptionError

    (tmp_path / "probe.txt").write_bytes(b"a" * (1 << 20))
    assert len(_probe_file(str(tmp_path / "probe.txt"))) == 1 << 20
    (tmp_path / "probe.txt").write_bytes(b"a" * ((1 << 20) + 1))
    with pytest.raises(OptionError, match="is 1048577 bytes; a probe file holds at most 1048576 "):
        _probe_file(str(tmp_path / "probe.txt"))


def test_steps_up_to_ten_million_are_taken_and_one_more_is_refused_naming_the_ceiling():
    assert TrainConfig(steps=10_000_000).steps == 10_000_000
    ((field, text),) = refusal(TrainConfig, steps=10_000_001)
    assert field == "steps" and text.startswith("10000001: allowed at most 10000000 (about twelve days")
