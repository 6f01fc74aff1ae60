"""A review of `draftsmith train`'s refusals: a --features folder of the user's own, a --draft-vocab below the spec's
topk and a --from-draft the spec cannot load are refused in preflight (exit 2) before the data is read; every bad
data file is named at once; --steps has a ceiling; the API refuses one path where a list is expected; a flipped
flag on resume is said once; the held-out message says what a JSONL file lacked."""
import json
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from draftsmith.testing import write_eagle3
from draftsmith.train import Job, TrainConfig
from draftsmith.limits import TRAIN_STEPS as MAX_STEPS
from draftsmith.train.checks import TrainError
from draftsmith.train.loop import STATE
from draftsmith.train.feature_checks import foreign

from test_preflight_paths import refused, train   # the CLI runner and its exit-2 check, shared


@pytest.fixture
def small(tiny):
    """A command line that trains one step on two windows of the tiny target, once given --out."""
    return ["--target", tiny / "target", "--data", tiny / "data", "--steps", 1, "--batch", 1, "--max-windows", 2,
            "--seq", 16, "--draft-vocab", 96, "--eval-prompts", 0]


@pytest.fixture
def nothing_read(monkeypatch):
    """The test fails if the data is read (preflight alone must refuse)."""
    from draftsmith.train import data as D

    monkeypatch.setattr(D, "read_documents", lambda *a, **k: pytest.fail("read the data"))


def test_features_in_a_folder_of_the_users_own_are_refused_and_it_is_left_as_it_was(small, tmp_path, nothing_read):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    refused(train(*small, "--out", tmp_path / "out", "--features", mine),
            f"--features {mine} holds notes.txt, which no extraction wrote", "give a new or empty features folder")
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert not (tmp_path / "out").exists()


def test_a_features_folder_holds_only_what_extraction_writes_and_out_may_be_inside_it(tmp_path):
    feats = tmp_path / "feats"
    feats.mkdir()
    for name in ("features.json", "shard-00000.safetensors", "shard-00001.tmp"):
        (feats / name).write_text("x")
    (feats / "out").mkdir()
    assert foreign(feats, feats / "out") == []                       # --out inside the features folder: aside
    assert foreign(feats, tmp_path / "o") == ["out"]
    assert foreign(feats, feats) == []                               # --out itself: out_problems' rule
    assert foreign(tmp_path / "new", tmp_path / "o") == []


def test_a_draft_vocab_below_the_specs_topk_is_refused_before_the_data_is_read(small, tmp_path, nothing_read):
    res = train(*small, "--out", tmp_path / "out", "--draft-vocab", 1)
    said = refused(res, "--draft-vocab 1: allowed 0 (the target's whole vocabulary) or at least 4, the topk of spec "
                        "eagle3-llama", "give --draft-vocab 4 or more")
    assert "plan()" not in said


def test_a_draft_vocab_of_topk_or_of_the_whole_vocabulary_passes(job, tmp_path):
    from draftsmith.train.preflight import preflight

    for vocab in (4, None, 0):
        preflight(job(tmp_path / f"out{vocab}", draft_vocab=vocab))


def test_a_from_draft_the_spec_cannot_load_is_refused_before_the_data_is_read(small, tiny, tmp_path, nothing_read):
    said = refused(train(*small, "--out", tmp_path / "out", "--from-draft", tiny / "target"),
                   f"--from-draft {tiny / 'target'} is not a draft spec eagle3-llama loads onto the target",
                   "are the target and draft folders swapped?")
    assert said.startswith("error: --from-draft")
    assert not (tmp_path / "out").exists()


def test_a_from_draft_that_fits_passes_preflight(job, tiny, tmp_path):
    from draftsmith.train.preflight import preflight

    preflight(job(tmp_path / "out", from_draft=write_eagle3(tmp_path / "d", tiny / "target")))


def test_the_first_problem_of_every_bad_data_file_is_named_at_once(small, tmp_path):
    (tmp_path / "b1.jsonl").write_text('{"text": "a"}\nnot json\n{"text": 5}\n')
    (tmp_path / "b2.jsonl").write_text('{"text": "\\ud800"}\n')
    (tmp_path / "b3.json").write_text('[{"text": "x"}, 5]')
    (tmp_path / "ok.txt").write_text("fine text\n")
    args = [a for f in ("b1.jsonl", "ok.txt", "b2.jsonl", "b3.json") for a in ("--data", tmp_path / f)]
    said = refused(train(*small, "--out", tmp_path / "out", *args),
                   f"{tmp_path / 'b1.jsonl'}:2: not valid JSON", f"{tmp_path / 'b2.jsonl'}:1: the text holds a lone "
                   "surrogate", f"{tmp_path / 'b3.json'}:1:17: a JSON object is expected, found 5")
    assert "b1.jsonl:3" not in said   # a file's reading stops at its first problem


@pytest.mark.parametrize("field", ["data", "held_out"])
@pytest.mark.parametrize("one", ["good.txt", Path("good.txt")])
def test_one_path_where_the_api_takes_a_list_is_refused(tmp_path, field, one):
    with pytest.raises(TrainError) as e:
        Job(spec="eagle3-llama", target=tmp_path, out=tmp_path / "out", **{field: one})
    assert str(e.value) == (f"{field} takes a list of paths, got the {type(one).__name__} 'good.txt'; write "
                            f"{field}=['good.txt']")
    assert Job(spec="eagle3-llama", target=tmp_path, out=tmp_path / "out", **{field: [one]})


def test_steps_past_the_ceiling_are_refused_with_the_other_options(small, tmp_path, nothing_read):
    assert TrainConfig(steps=MAX_STEPS).steps == MAX_STEPS
    refused(train(*small, "--out", tmp_path / "out", "--steps", 10**20, "--batch", 0),
            f"--steps {10**20}: allowed at most {MAX_STEPS}", "--batch 0: allowed an integer >= 1")
    assert not (tmp_path / "out").exists()


def test_steps_past_the_ceiling_are_refused_on_resume_too(small, tmp_path, request):
    out = tmp_path / "out"
    assert train(*small, "--out", out).exit_code == 0
    before = (out / STATE).read_bytes()
    request.getfixturevalue("nothing_read")   # the resume must be refused in preflight
    refused(train(*small, "--out", out, "--steps", MAX_STEPS + 1), f"--steps {MAX_STEPS + 1}: allowed at most")
    assert (out / STATE).read_bytes() == before


def write_chat_target(folder: Path, target: Path) -> Path:
    """A copy of ``target`` whose byte tokenizer has a chat template (--chat needs one)."""
    from draftsmith.testing import write_byte_tokenizer

    shutil.copytree(target, folder)
    write_byte_tokenizer(folder, chat_template="{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    return folder


def started(out: Path, run: dict, **config) -> Path:
    """An --out holding a trainer.pt that records ``config`` (over TrainConfig's defaults) and the ``run``."""
    out.mkdir()
    torch.save({"config": {**asdict(TrainConfig()), **config}, "run": run}, out / STATE)
    return out


@pytest.mark.parametrize("old, new", [(True, False), (False, True)])
def test_a_chat_setting_flipped_on_resume_is_named_once_as_given(small, tiny, tmp_path, nothing_read, old, new):
    from draftsmith.options import flag

    out = started(tmp_path / "out", {"chat": old}, batch=1, steps=1, lr=1e-3)
    target = write_chat_target(tmp_path / "chat", tiny / "target") if new else tiny / "target"
    text = refused(train(*small, "--out", out, "--target", target, flag("chat", new)),
                   f"{flag('chat', new)}: the run in {out} was started with {flag('chat', old)}, and a resumed run "
                   f"keeps its settings", f"give {flag('chat', old)} again")
    assert "--chat --" not in text and text.count(flag("chat", new)) == 1


def test_a_flags_own_spelling_is_not_prefixed_with_its_name_again():
    from draftsmith.cli.train import option

    said = TrainError([("chat", "--no-chat: x"), ("chat", "--chat: y"), ("seq", "--seq-ish: z"), ("ttt", "2: w")])
    assert said.render(option).splitlines() == ["--no-chat: x", "--chat: y", "--seq --seq-ish: z", "--ttt 2: w"]
    assert str(said).splitlines()[0] == "chat --no-chat: x"   # the API names its field, as before


def test_a_jsonl_held_out_file_without_a_long_record_is_said_as_such(tiny, tmp_path):
    out = write_eagle3(tmp_path / "out", tiny / "target")
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps({"text": "x = 1"}) + "\n")
    said = refused(train("--out", out, "--target", tiny / "target", "--eval-only", "--eval-prompts", 1,
                         "--eval", short),
                   "held-out: none of the 1 files has 192 tokens in one record (a JSONL or JSON file's prompts "
                   "start at a record's start)")
    assert "first third" not in said


def test_a_from_draft_is_planned_only_where_a_fresh_run_starts_from_it(tiny, tmp_path):
    """--from-draft is planned against the spec and the target only with a spec, a target folder preflight
    passed that holds a config.json, and no run in --out to resume (a resumed run ignores --from-draft): the
    target folder itself, refused as a draft when planned, passes each of those."""
    from types import SimpleNamespace

    from draftsmith.specs.loader import load_spec
    from draftsmith.train.preflight import from_draft_problems

    spec, out, bare = load_spec("eagle3-llama"), tmp_path / "out", tmp_path / "bare"
    out.mkdir()
    bare.mkdir()
    job = SimpleNamespace(from_draft=str(tiny / "target"), eval_only=False, target=str(tiny / "target"),
                          out=str(out))
    assert [name for name, _ in from_draft_problems(job, spec, True)] == ["from_draft"]
    assert from_draft_problems(job, None, True) == []
    assert from_draft_problems(job, spec, False) == []
    assert from_draft_problems(SimpleNamespace(**{**vars(job), "target": str(bare)}), spec, True) == []
    (out / STATE).write_bytes(b"")
    assert from_draft_problems(job, spec, True) == []
