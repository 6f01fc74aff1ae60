"""What a dogfooding pass of `draftsmith train` found: a tokenizer whose ids run past the target's vocabulary
crashed the feature extraction (an internal error, and a run left in --out that every rerun resumed into the
crash); a fresh start refused after self-distillation (no window of --seq tokens) left a step-0 run that blocked
the corrected rerun."""
import shutil

import pytest
import torch

import draftsmith.train.pipeline as pipeline
from draftsmith.testing import write_target
from draftsmith.train import run
from draftsmith.train.checks import TrainError


@pytest.fixture(scope="module")
def narrow(tmp_path_factory):
    """A target whose config says vocab_size 200 beside the byte tokenizer (ids up to 257)."""
    from draftsmith.testing import write_byte_tokenizer

    target = write_target(tmp_path_factory.mktemp("v200") / "t", vocab_size=200, bos_token_id=0, eos_token_id=1)
    write_byte_tokenizer(target)   # the mistake: a tokenizer that is not this model's
    return target


def test_ids_past_the_targets_vocabulary_are_refused_before_any_work(job, tmp_path, narrow):
    out = tmp_path / "out"
    with pytest.raises(TrainError) as info:
        run(job(out, target=narrow, draft_vocab=None))
    [(field, said)] = info.value.problems
    assert field == "target"
    assert said.startswith(f"{narrow}: its tokenizer gave ids outside the target's vocabulary 0..199 (")
    assert said.endswith("): is the tokenizer in the target folder this model's?") and "tokens of the data" in said
    assert not out.exists()   # nothing written: a rerun is a fresh start


def test_self_distilled_ids_past_the_vocabulary_are_refused(job, tmp_path, monkeypatch, tiny):
    """The target's own text, decoded and encoded again, can hold ids the target lacks (an added token)."""
    monkeypatch.setattr(pipeline, "self_distilled", lambda model, docs, tok, *a, **k: ["\u00ff" * 400] * len(docs))
    real = pipeline.D.encode

    def encode(docs, tok, sep):
        ids = real(docs, tok, sep)
        return ids if not docs or docs[0] != "\u00ff" * 400 else torch.full_like(ids, 10_000)

    monkeypatch.setattr(pipeline.D, "encode", encode)
    out = tmp_path / "out"
    with pytest.raises(TrainError, match=r"vocabulary 0\.\.\d+ \(\d+ tokens of the self-distilled text, ids 10000\)"):
        run(job(out, self_distill=4))
    assert not out.exists()   # a fresh start refused: what it wrote is removed


def test_no_window_after_self_distillation_leaves_nothing_to_resume(job, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "self_distilled", lambda model, docs, *a, **k: ["x"] * len(docs))
    out = tmp_path / "out"
    with pytest.raises(TrainError, match="the data gave no training windows"):
        run(job(out, self_distill=4))
    assert not out.exists()   # was a step-0 run, and a rerun with other settings was refused as a resume
    monkeypatch.undo()
    shutil.rmtree(out, ignore_errors=True)


def test_a_resumed_run_is_not_told_to_run_again_to_resume(job, tmp_path, caplog):
    """Resuming a run stopped early loads its draft, whose note said "saved at step 1 of 50 ...: run the training
    again to resume" at the start of the very run that resumes it (a dogfooding helper); other loads still say it."""
    import logging

    import draftsmith

    out, lines = tmp_path / "stopped", []
    settings = {"steps": 50, "save_every": 1, "minutes": 1e-9}
    run(job(out, config=settings), log=lambda line: None)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        run(job(out, config=settings), log=lines.append)
        assert any(line.startswith(f"resuming the draft in {out}") for line in lines), lines
        assert "training checkpoint saved at step" not in caplog.text
        draftsmith.assemble("eagle3-llama", target=job(out).target, draft=out)
    assert f"draft {out}: it is a training checkpoint saved at step" in caplog.text   # said outside the resume


def test_the_vocabulary_bound_is_exact(narrow):
    """ids 0..vocab_size-1 fit; vocab_size and a negative id do not (a plant of `<=` passed the tests above)."""
    from types import SimpleNamespace

    from draftsmith.train.data_checks import ids_outside

    job = SimpleNamespace(target=narrow)
    assert ids_outside(job, torch.tensor([0, 199])) is None
    for bad in (200, -1):
        error = ids_outside(job, torch.tensor([5, bad]))
        assert error is not None and f"(1 token of the data, ids {bad})" in str(error)
