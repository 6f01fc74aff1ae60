"""`draftsmith train` refuses bad input with one message naming the option or path and what is allowed (exit 2),
before the target is fetched, the data read or a feature extracted; --eval-only needs a draft and held-out text,
not training data."""
import json

import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target
from draftsmith.train import Job, TrainConfig
from draftsmith.train.checks import TrainError


def train(*args):
    return CliRunner().invoke(app, ["train", *map(str, args)])


@pytest.fixture
def base(tiny, tmp_path):
    """A command line that would train on the tiny target (--out tmp/out) once given --data."""
    return ["--out", tmp_path / "out", "--target", tiny / "target", "--steps", 2, "--batch", 2, "--seq", 48,
            "--draft-vocab", 96, "--max-windows", 4, "--eval-prompts", 0]


@pytest.fixture
def good(base, tiny):
    """``base`` with the tiny data: it trains."""
    return [*base, "--data", tiny / "data"]


@pytest.fixture
def nothing_slow(monkeypatch):
    """The test fails if the target is fetched or the pipeline runs."""
    import draftsmith.train
    from draftsmith import hub

    monkeypatch.setattr(hub, "target_folder", lambda *a, **k: pytest.fail("fetched the target"))
    monkeypatch.setattr(draftsmith.train, "run", lambda *a, **k: pytest.fail("ran the pipeline"))


def refused(res, *texts):
    assert res.exit_code == 2, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output, res.output
    for t in texts:
        assert t in res.output, res.output


@pytest.mark.parametrize(("option", "value", "found", "allowed"), [
    ("--labels", "medium", "'medium'", "'soft' or 'hard'"),          # B4
    ("--batch", "0", "0", "an integer >= 1"),                         # B5
    ("--ttt", "0", "0", "an integer >= 1"),                           # B6
    ("--lr", "-1", "-1.0", "a finite number > 0"),                    # B7
    ("--lr", "nan", "nan", "a finite number > 0"),
    ("--lr", "inf", "inf", "a finite number > 0"),
    ("--seq", "1", "1", "an integer >= 4 (ttt + 1)"),                 # B8
    ("--seq", "3", "3", "an integer >= 4 (ttt + 1)"),
    ("--steps", "0", "0", "an integer >= 1"),                         # C1
    ("--save-every", "0", "0", "an integer >= 1"),
    ("--minutes", "-1", "-1.0", "a number >= 0"),
    ("--eval-prompts", "-1", "-1", "an integer >= 0"),
    ("--draft-vocab", "-1", "-1", "an integer >= 0"),
    ("--self-distill", "-1", "-1", "an integer >= 0"),
    ("--prompts-per-doc", "0", "0", "an integer >= 1"),
    ("--distill-batch", "0", "0", "an integer >= 1"),
    ("--max-windows", "-1", "-1", "an integer >= 0"),
])
def test_bounds_are_refused_up_front(good, tmp_path, nothing_slow, option, value, found, allowed):
    refused(train(*good, option, value), f"{option} {found}: allowed {allowed}")
    assert not (tmp_path / "out").exists()


def test_every_bound_of_the_config_is_listed_at_once_and_the_api_raises_a_value_error():
    with pytest.raises(TrainError) as e:
        TrainConfig(steps=0, batch=0, labels="medium")
    assert str(e.value).splitlines() == ["steps 0: allowed an integer >= 1", "batch 0: allowed an integer >= 1",
                                         "labels 'medium': allowed 'soft' or 'hard'"]
    with pytest.raises(ValueError, match="seq 2: allowed an integer >= 4"):
        Job(spec="eagle3-llama", target="t", out="o", seq=2)


def test_the_numbers_bounds_and_the_paths_problems_are_reported_in_one_round(good, tmp_path, nothing_slow):
    missing = tmp_path / "nonexist"   # a bad number of each class, and preflight's problems, in one message
    res = train(*good, "--steps", 0, "--max-windows", -1, "--seq", 2, "--spec", "eagle3-lama", "--data", missing)
    refused(res, "--steps 0: allowed an integer >= 1", "--max-windows -1: allowed", "--seq 2: allowed",
            "--spec is not usable: no spec named 'eagle3-lama'", f"--data {missing}: no such file or folder")
    assert not (tmp_path / "out").exists()


def test_a_missing_target_folder_is_named(good, tmp_path, nothing_slow):             # B1
    missing = tmp_path / "nonexist"
    refused(train(*good, "--target", missing), f"--target folder {missing} does not exist")
    refused(train(*good, "--target", tmp_path), f"--target folder {tmp_path} has no config.json")
    assert not (tmp_path / "out").exists()


def test_an_unknown_spec_is_named_before_the_target_is_fetched(good, tmp_path, nothing_slow):
    refused(train(*good, "--spec", "eagle3-lama"), "--spec is not usable: no spec named 'eagle3-lama'",
            "Did you mean 'eagle3-llama'?")
    assert not (tmp_path / "out").exists()


def test_a_missing_data_path_is_named_before_the_target_is_fetched(tmp_path, nothing_slow):   # B2
    missing = tmp_path / "nonexist.txt"
    refused(train("--out", tmp_path / "out", "--target", "smollm2", "--data", missing, "--eval", missing),
            f"--data {missing}: no such file or folder", f"--eval {missing}: no such file or folder")
    assert not (tmp_path / "out").exists()


def test_data_given_as_the_out_folder_is_said_as_such(tiny, tmp_path, nothing_slow):
    """--out given the data folder by mistake: its files are not read as data (the run's own folder), and the
    message says so, not only that the folder holds no text files (it does)."""
    data = tmp_path / "d"
    data.mkdir()
    (data / "data.txt").write_text((tiny / "data" / next(iter(sorted(p.name for p in (tiny / "data").iterdir())))
                                    ).read_text())
    refused(train("--out", data, "--target", tiny / "target", "--data", data),
            f"--data {data}: no text or JSONL files, so no training windows ({data} is this run's --out or "
            "--features folder, or inside it, which is not read as data")
    refused(train("--out", tmp_path / "o2", "--features", data, "--target", tiny / "target", "--data", data),
            f"({data} is this run's --out or --features folder")   # a --features folder of its own, the same
    other = tmp_path / "other"
    other.mkdir()
    res = train("--out", data / "o", "--target", tiny / "target", "--data", other)
    assert "this run's --out" not in res.output   # a data folder that merely holds nothing is not told so


def test_data_without_a_training_window_says_what_it_held(base, good, tmp_path):              # B3
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(train(*base, "--data", empty), f"--data {empty}: no text or JSONL files")
    (empty / "blank.txt").write_text("\n\n")
    refused(train(*base, "--data", empty), f"--data {empty}: the data gave no training windows (1 file, "
                                           "0 documents, 0 tokens in all: no text)")
    (empty / "blank.txt").write_text("x = 1\n")
    refused(train(*base, "--data", empty), "--seq 48: the data gave no training windows (1 file, 1 document, 7 "
                                           "tokens in all; a window is 48 tokens)")
    (empty / "blank.txt").unlink()
    (empty / "qa.jsonl").write_text('{"question": "q", "answer": "a"}\n')
    refused(train(*base, "--data", empty), "the data gave no training windows (1 file, 0 documents, 0 tokens in "
                                           f"all, 1 record without text skipped (no text, prompt, completion, "
                                           f"messages or conversations field, or an empty one): "
                                           f"{empty / 'qa.jsonl'}:1: no text)")
    assert not (tmp_path / "out").exists()


def test_a_window_longer_than_the_targets_context_is_refused_up_front(good, tiny, tmp_path, nothing_slow):
    refused(train(*good, "--seq", 4096), "--seq 4096: allowed an integer up to 512, the target's context "
                                         f"(max_position_embeddings in {tiny / 'target' / 'config.json'})")
    assert not (tmp_path / "out").exists()


def test_a_draft_given_as_the_target_is_named_with_every_other_problem(good, tiny, tmp_path, nothing_slow):
    draft = write_eagle3(tmp_path / "draft", tiny / "target")
    missing = tmp_path / "missing.txt"
    refused(train(*good, "--target", draft, "--eval", missing),
            f"--target folder {draft} has no tokenizer (tokenizer.json, tokenizer_config.json, tokenizer.model or "
            "vocab.json), which reads the data; it holds a draft (spec eagle3-llama), not a target: "
            "give the target folder the "
            "draft is for as --target", f"--eval {missing}: no such file or folder")


def test_an_out_folder_without_a_trainer_state_is_never_overwritten(good, tiny, tmp_path, nothing_slow):
    out = write_eagle3(tmp_path / "out", tiny / "target")       # a downloaded draft, say
    before = {f: f.read_bytes() for f in out.iterdir()}
    refused(train(*good), f"--out {out} holds config.json, model.safetensors but no trainer.pt, so there is no run "
                          "to resume and training would overwrite it: give a new or empty --out, or --from-draft "
                          f"{out} with a new --out to train on from the draft it holds")
    assert {f: f.read_bytes() for f in out.iterdir()} == before
    other = tmp_path / "other"
    (other / "features").mkdir(parents=True)                    # a run's own features folder is no obstacle
    (other / "notes.txt").write_text("mine")
    res = train(*good, "--out", other)
    refused(res, f"--out {other} holds notes.txt but no trainer.pt")
    assert "features" not in res.output.split("holds")[1].split("but")[0]
    res = train(*good, "--out", other, "--features", f"{other}/../{other.name}/features")   # spelt another way
    assert "features" not in res.output.split("holds")[1].split("but")[0], res.output
    assert "--from-draft" not in res.output                     # no draft there to start from
    refused(train(*good, "--from-draft", other), f"--from-draft {other} holds no draft (config.json and weights "
                                                 "(safetensors or .bin, sharded or not))")
    refused(train(*good, "--from-draft", tmp_path / "nowhere"), f"--from-draft {tmp_path / 'nowhere'}: no such folder")
    refused(train(*good, "--from-draft", out, "--eval-only", "--eval", tiny / "data"),
            "--from-draft starts a training run: --eval-only measures the draft in --out")


def test_an_out_folder_that_is_the_target_or_another_whole_model_is_not_offered_as_from_draft(good, tiny, tmp_path,
                                                                                              nothing_slow):
    """--out naming the target (or another whole model): no '--from-draft OUT' (which preflight then refuses: a
    whole model is no draft); the target is said to be the target."""
    res = train(*good, "--out", tiny / "target")
    refused(res, f"--out {tiny / 'target'} holds config.json", "give a new or empty --out (it is the --target folder)")
    assert "--from-draft" not in res.output, res.output
    other = write_target(tmp_path / "model", num_hidden_layers=2)
    res = train(*good, "--out", other)
    refused(res, f"--out {other} holds config.json", "give a new or empty --out")
    assert "--from-draft" not in res.output and "--target folder" not in res.output, res.output


def test_a_draft_whose_weights_are_cut_short_is_named_by_file(good, tiny, tmp_path, nothing_slow):
    """--from-draft (and --eval-only's --out) holding a draft whose weight file cannot be read: the file and the
    reader's reason, as the assembler says it, not 'holds no draft'."""
    draft = write_eagle3(tmp_path / "draft", tiny / "target")
    weights = draft / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    says = (f"holds a draft whose weights cannot be read: {weights}: not a readable safetensors file: the file is "
            f"{weights.stat().st_size} bytes and its header describes ")
    res = train(*good, "--from-draft", draft)
    refused(res, f"--from-draft {draft} {says}", "save or copy that file again")
    assert "holds no draft" not in res.output
    res = train("--out", draft, "--target", tiny / "target", "--eval-only", "--eval-prompts", 1, "--eval",
                tiny / "data" / "heapq.py")
    refused(res, f"--out {draft} {says}")
    assert "train one first" not in res.output


def test_stdlib_adds_to_the_data_and_the_help_says_so(good, tiny, monkeypatch):
    import typer

    import draftsmith.train
    from draftsmith.train import data as D

    jobs = []
    monkeypatch.setattr(draftsmith.train, "run", lambda job, **kw: jobs.append(job) or {})
    assert train(*good, "--stdlib").exit_code == 0
    assert jobs[0].data == [tiny / "data", *D.stdlib_files()]
    (stdlib,) = [p for p in typer.main.get_command(app).commands["train"].params if p.name == "stdlib"]
    assert "(with --data: both)" in stdlib.help and "(with --eval: both)" in stdlib.help


def test_resuming_with_another_seq_is_an_argument_error(good, tmp_path, nothing_slow):    # B9, before anything
    feats = tmp_path / "out" / "features"
    feats.mkdir(parents=True)
    (feats / "features.json").write_text(json.dumps({"taps": [2, 4, 5], "seq": 64, "per_shard": 16}))
    refused(train(*good), "--seq 48:", "holds features of 64-token windows")
    assert list(feats.iterdir()) == [feats / "features.json"]


def test_features_of_other_taps_are_an_argument_error_with_the_same_text(good, tmp_path):  # B9, at extraction
    feats = tmp_path / "out" / "features"
    feats.mkdir(parents=True)
    (feats / "features.json").write_text(json.dumps({"taps": [1], "seq": 48, "per_shard": 16}))
    refused(train(*good), f"{feats} holds features for {{'taps': [1], 'seq': 48, 'per_shard': 16}}, not "
                          "{'taps': [2, 4, 5], 'seq': 48, 'per_shard': 16}")


@pytest.mark.parametrize(("line", "says"), [('{"text": "unfinished', "not valid JSON (Unterminated string"),
                                            ("[1, 2]", "a JSON object is expected, found [1, 2]")])
def test_a_bad_jsonl_line_is_named_by_file_and_line(base, tmp_path, line, says):            # B10
    f = tmp_path / "d.jsonl"
    f.write_text('{"text": "fine"}\n\n' + line + "\n")
    refused(train(*base, "--data", f), f"{f}:3: {says}")
    assert not (tmp_path / "out").exists()


def test_bad_held_out_records_are_named_with_the_datas_before_training(base, tiny, tmp_path, monkeypatch):
    """Every --eval JSONL / JSON file's first problem, with the data's, before the draft is built (they were read
    only after training, the first bad file alone); --eval-only too."""
    import draftsmith.train.pipeline as pipeline

    monkeypatch.setattr(pipeline, "start_fresh", lambda *a, **k: pytest.fail("built a draft"))
    data, one, two = tmp_path / "d.jsonl", tmp_path / "e1.jsonl", tmp_path / "e2.json"
    data.write_text('{"text": "fine"}\n[1]\n')
    one.write_text('{"text": "ok"}\n{bad json\n')
    two.write_bytes(b"\xff\xfe")
    res = train(*base, "--data", data, "--eval", one, "--eval", two)
    refused(res, f"{data}:2: a JSON object is expected", f"--eval {one}:2: not valid JSON",
            f"--eval {two}: not UTF-8 text (byte 0xff at offset 0)")
    assert not (tmp_path / "out").exists()
    write_eagle3(tmp_path / "out", tiny / "target")
    monkeypatch.setattr(pipeline, "evaluate", lambda *a, **k: pytest.fail("evaluated"))
    refused(train(*base, "--eval-only", "--eval-prompts", 1, "--eval", one), f"--eval {one}:2: not valid JSON")


def test_hidden_entries_under_a_data_folder_are_not_read(tmp_path):
    """A checkout's .git (its HEAD, config: text without a suffix) and a .venv are not training text; a hidden
    file named directly is."""
    from draftsmith.train.data import expand

    (tmp_path / "src" / ".git" / "refs").mkdir(parents=True)
    (tmp_path / "src" / ".venv").mkdir()
    for f in ("src/main.py", "src/README", "src/.git/HEAD", "src/.git/refs/main", "src/.venv/x.py", "src/.env"):
        (tmp_path / f).write_text("text\n")
    assert expand([tmp_path / "src", tmp_path / "src" / ".env"]) == [
        tmp_path / "src" / "README", tmp_path / "src" / "main.py", tmp_path / "src" / ".env"]


def test_eval_only_needs_a_draft_and_held_out_text_not_training_data(tiny, tmp_path, monkeypatch):   # A5
    out, heapq = tmp_path / "out", tiny / "data" / "heapq.py"
    args = ["--out", out, "--target", tiny / "target", "--eval-only", "--eval-prompts", 1]
    refused(train(*args, "--eval", heapq), f"--out {out} holds no draft")
    refused(train(*args), "--eval-only needs held-out text")
    write_eagle3(out, tiny / "target")
    short = tmp_path / "short.txt"
    short.write_text("x = 1\n")
    refused(train(*args, "--eval", short), "held-out: none of the 1 files has 192 tokens")
    res = train(*args, "--eval", heapq)
    assert res.exit_code == 0 and "chain 5: tau" in res.output, res.output
    assert not (out / "features").exists()
