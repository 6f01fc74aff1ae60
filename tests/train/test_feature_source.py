"""A features folder is only used for the run it was made for: features.json records the target (config, weight
files, hidden size), the token windows and --bf16 beside the taps and seq, and every run that uses the folder
(extracting more, or --max-windows 0 reading only what is there) compares them before slow work; a smaller
--max-windows before a larger one leaves no gap of windows never extracted."""
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import edit_config, write_target
from draftsmith.train import data as D
from draftsmith.train import pipeline
from draftsmith.train.checks import TrainError
from draftsmith.train.features import META, extract
from draftsmith.train.pipeline import run


@pytest.fixture(scope="module")
def made(tiny, tmp_path_factory):
    """A features folder made by a 1-step run on the tiny target (default taps [2, 4, 5], seq 48, bf16)."""
    root = tmp_path_factory.mktemp("feature-source")
    res = train("--out", root / "first", "--target", tiny / "target", "--data", tiny / "data", "--steps", 1,
                "--batch", 2, "--seq", 48, "--draft-vocab", 96, "--max-windows", 8, "--eval-prompts", 0)
    assert res.exit_code == 0, res.output
    return root / "first" / "features"


def train(*args):
    return CliRunner().invoke(app, ["train", *map(str, args)])


def copy(made, tmp_path):
    feats = tmp_path / "feats"
    shutil.copytree(made, feats)
    return feats


def refused(res, *texts):
    assert res.exit_code == 2, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output, res.output
    out = " ".join(res.output.split())
    for t in texts:
        assert t in out, out


def args(tiny, tmp_path, feats, *more):
    return ["--out", tmp_path / "out", "--target", tiny / "target", "--data", tiny / "data", "--steps", 1,
            "--batch", 2, "--seq", 48, "--draft-vocab", 96, "--features", feats, "--eval-prompts", 0, *more]


def test_the_features_record_what_they_were_made_from(made):
    meta = json.loads((made / META).read_text())
    assert {"taps", "seq", "per_shard", "target", "windows", "bf16"} <= set(meta)
    assert meta["target"]["hidden_size"] == 64 and meta["bf16"] is True
    assert set(meta["target"]["weights"]) == {"model.safetensors"}


@pytest.mark.parametrize("max_windows", ["8", "0"])
def test_features_of_another_target_are_refused_naming_the_hidden_size(made, tiny, tmp_path, max_windows):
    other = write_target(tmp_path / "wide", tokenizer=True, hidden_size=128, intermediate_size=256)
    feats = copy(made, tmp_path)
    res = train(*args(tiny, tmp_path, feats, "--max-windows", max_windows), "--target", other)
    refused(res, f"--features {feats} holds features made for another run: they are of a target of hidden size "
                 "64, this one's is 128", "the target's config.json differs", "give a new --features folder")
    assert not (tmp_path / "out").exists()


def test_features_of_a_retrained_target_of_the_same_shape_are_refused(made, tiny, tmp_path):
    other = edit_config(tiny / "target", tmp_path / "retrained", rms_norm_eps=1e-5)
    feats = copy(made, tmp_path)
    refused(train(*args(tiny, tmp_path, feats, "--max-windows", 8), "--target", other),
            "holds features made for another run: the target's config.json differs")


def test_features_of_other_data_are_refused_before_the_draft_is_built(made, tiny, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(tiny / "data" / "heapq.py", data / "heapq.py")
    feats = copy(made, tmp_path)
    res = train(*args(tiny, tmp_path, feats, "--max-windows", 8), "--data", data)   # both folders: other windows
    refused(res, "the token windows differ (other --data, tokenizer, --seed or --self-distill)")
    assert not (tmp_path / "out").exists()
    refused(train(*args(tiny, tmp_path, feats, "--max-windows", 8, "--seed", 1)), "the token windows differ")


def test_features_extracted_without_bf16_are_refused_with_it(made, tiny, tmp_path):
    feats = copy(made, tmp_path)
    refused(train(*args(tiny, tmp_path, feats, "--max-windows", 8, "--no-bf16")),
            "they were extracted with --bf16, this run has --no-bf16")


def test_max_windows_0_checks_the_taps_before_anything_is_written(made, tiny, tmp_path):
    spec = tmp_path / "s.yaml"
    from draftsmith.specs.loader import load_spec

    text = open(load_spec("eagle3-llama").source).read()
    spec.write_text(text.replace("name: eagle3-llama", "name: e136")
                    .replace("aux_layers: {at: input}", "aux_layers: {ids: [1, 3, 6], at: input}"))
    feats = copy(made, tmp_path)
    refused(train(*args(tiny, tmp_path, feats, "--max-windows", 0), "--spec", spec),
            f"{feats} holds features for {{'taps': [2, 4, 5], 'seq': 48, 'per_shard': 16}}, not "
            "{'taps': [1, 3, 6], 'seq': 48, 'per_shard': 16}")
    assert not (tmp_path / "out").exists()


def test_max_windows_0_checks_the_window_length_against_seq_and_ttt(made, tiny, tmp_path):
    feats = copy(made, tmp_path)
    refused(train(*args(tiny, tmp_path, feats, "--max-windows", 0), "--seq", 40),
            "--seq 40: ", "holds features of 48-token windows")
    refused(train(*args(tiny, tmp_path, feats, "--max-windows", 0), "--ttt", 48),
            "--seq 48: allowed an integer >= 49 (ttt + 1)")
    assert not (tmp_path / "out").exists()


def test_store_problems_name_a_ttt_longer_than_the_windows(made):
    from types import SimpleNamespace

    from draftsmith.train.features import FeatureStore

    store = FeatureStore(made)
    j = SimpleNamespace(seq=48, config=SimpleNamespace(ttt=48, bf16=True))
    model = SimpleNamespace(draft=SimpleNamespace(taps=(2, 4, 5)))
    fp = json.loads((made / META).read_text())["target"]
    assert pipeline.store_problems(store, model, j, fp) == [
        ("ttt", f"48: the features in {made} are of 48-token windows, which allow --ttt 47 at most (a window holds "
                "ttt + 1 tokens)")]


def test_a_taps_mismatch_is_found_before_the_draft_is_built_or_self_distillation_runs(job, tmp_path, monkeypatch):
    feats = tmp_path / "feats"
    feats.mkdir()
    (feats / META).write_text(json.dumps({"taps": [1], "seq": 48, "per_shard": 16}))
    monkeypatch.setattr(pipeline, "start_fresh", lambda *a, **k: pytest.fail("built the draft"))
    monkeypatch.setattr(pipeline, "self_distilled", lambda *a, **k: pytest.fail("self-distilled"))
    with pytest.raises(TrainError, match=r"holds features for \{'taps': \[1\]"):
        run(job(tmp_path / "out", features=feats, self_distill=4))
    assert not (tmp_path / "out").exists()


def test_a_short_last_shard_is_extracted_again_whole(tiny, tmp_path):
    from transformers import AutoTokenizer

    from draftsmith.train.draft_io import init_draft

    tok = AutoTokenizer.from_pretrained(str(tiny / "target"))
    ids = D.encode(D.read_documents(D.expand([tiny / "data"])), tok, 257)
    model = init_draft("eagle3-llama", tiny / "target", tmp_path / "d", None)
    wins = D.windows(ids, 48)
    assert extract(model, wins, tmp_path / "f", limit=8) == 8       # shard 0 holds 8 of its 16
    assert extract(model, wins, tmp_path / "f", limit=32) == 32
    got = torch.cat([load_file(str(p))["ids"].long() for p in sorted((tmp_path / "f").glob("shard-*"))])
    assert torch.equal(got, wins[:32])                               # every window of the 32, in order, once
    assert extract(model, wins, tmp_path / "f", limit=8) == 32       # the rows the folder holds, which train reads


@pytest.mark.parametrize("max_windows", ["8", "0"])
def test_shards_without_features_json_are_refused_before_anything_is_written(made, tiny, tmp_path, max_windows):
    """Shards without the features.json extract writes first are not ours: they were adopted unchecked (one of 5
    taps crashed training with a raw RuntimeError after --out was written)."""
    feats = copy(made, tmp_path)
    (feats / META).unlink()
    refused(train(*args(tiny, tmp_path, feats, "--max-windows", max_windows)),
            f"--features {feats} holds 1 feature shard (shard-00000.safetensors) but no features.json",
            "remove the folder (its features are extracted again) or give another --features folder")
    assert not (tmp_path / "out").exists() and not (feats / META).exists()
