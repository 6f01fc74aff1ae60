"""A fresh draft follows the spec's ``draft.vocab``: ``reduced: false`` / ``true`` against --draft-vocab is refused
before anything runs, naming --draft-vocab, when they disagree (it was a CheckpointMismatch after the data was read,
or a missing d2t); ``d2t: absolute`` gets target ids in d2t, at the start and in every export (offsets failed the
load with a VocabMapError blaming --out)."""
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.specs.loader import load_spec
from draftsmith.train.checks import TrainError
from draftsmith.train.pipeline import run

V = 258   # the tiny target's vocabulary


def vocab_spec(tmp_path, vocab: str) -> Path:
    """eagle3-llama with ``vocab: {vocab}``, as a file."""
    text = Path(load_spec("eagle3-llama").source).read_text().replace("name: eagle3-llama", "name: voc")
    old = "vocab: {reduced: auto, d2t: offset}"
    assert old in text
    (tmp_path / "voc.yaml").write_text(text.replace(old, f"vocab: {{{vocab}}}"))
    return tmp_path / "voc.yaml"


@pytest.mark.parametrize(("vocab", "draft_vocab", "says"), [
    ("reduced: false", 96, "draft_vocab 96: spec voc says draft.vocab.reduced: false"),
    ("reduced: true", None, "draft_vocab 0: spec voc says draft.vocab.reduced: true"),
    ("reduced: true", 300, "draft_vocab 300: spec voc says draft.vocab.reduced: true (a d2t / t2d map over fewer "
                           "tokens than the target's): give a --draft-vocab below the target's 258"),
])
def test_a_draft_vocab_the_spec_refuses_is_named_before_anything_runs(job, tmp_path, vocab, draft_vocab, says):
    out = tmp_path / "out"
    with pytest.raises(TrainError) as e:
        run(job(out, spec=vocab_spec(tmp_path, vocab), draft_vocab=draft_vocab))
    assert says in str(e.value) and [p[0] for p in e.value.problems] == ["draft_vocab"], str(e.value)
    assert not out.exists()


def test_the_command_line_names_the_option(tiny, tmp_path):
    res = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "out"), "--target", str(tiny / "target"),
                                   "--data", str(tiny / "data"), "--spec", str(vocab_spec(tmp_path, "reduced: false")),
                                   "--seq", "48", "--steps", "1", "--draft-vocab", "96"])
    assert res.exit_code == 2, res.output
    assert "--draft-vocab 96: spec voc says draft.vocab.reduced: false" in " ".join(res.output.split())
    assert "give --draft-vocab 0" in " ".join(res.output.split())
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("vocab", "draft_vocab", "kept"), [("reduced: false", None, V), ("reduced: true", 96, 96)])
def test_a_vocabulary_the_spec_allows_trains_and_loads(job, tiny, tmp_path, vocab, draft_vocab, kept):
    spec, out = vocab_spec(tmp_path, vocab), tmp_path / "out"
    run(job(out, spec=spec, draft_vocab=draft_vocab, max_windows=4, config={"steps": 1}))
    assert len(draftsmith.assemble(spec, target=tiny / "target", draft=out).draft.kept_ids()) == kept


def test_an_absolute_d2t_spec_gets_target_ids_and_loads_them_back(job, tiny, tmp_path):
    spec, out = vocab_spec(tmp_path, "reduced: auto, d2t: absolute"), tmp_path / "out"
    run(job(out, spec=spec, max_windows=4, config={"steps": 1}))
    tensors = load_file(str(out / "model.safetensors"))
    assert torch.equal(tensors["d2t"], tensors["t2d"].nonzero().flatten())   # the kept target ids themselves
    model = draftsmith.assemble(spec, target=tiny / "target", draft=out)
    assert torch.equal(model.draft.kept_ids(), tensors["d2t"])
    again = tmp_path / "again"   # --from-draft re-exports: the same convention
    run(job(again, spec=spec, from_draft=out, max_windows=4, config={"steps": 1}))
    assert torch.equal(load_file(str(again / "model.safetensors"))["d2t"], tensors["d2t"])


def test_the_targets_sizes_are_read_from_a_text_config_too(tmp_path):
    """A multimodal target states its sizes under text_config: preflight's vocabulary and tap checks read them
    there (None only where the config cannot be read here, e.g. a cached target not fetched yet)."""
    import json
    from types import SimpleNamespace

    from draftsmith.train.preflight import target_size

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "x", "text_config": {
        "vocab_size": 300, "num_hidden_layers": 9}}))
    job = SimpleNamespace(target=tmp_path)
    assert (target_size(job, "vocab_size"), target_size(job, "num_hidden_layers")) == (300, 9)
    assert target_size(SimpleNamespace(target=tmp_path / "missing"), "vocab_size") is None
