"""The optimisation loop's pieces: the learning-rate schedule's exact shape, which parameters train, and a fresh
run that starts at its first step."""
import math

import pytest
import torch

from draftsmith.train import data as D
from draftsmith.train.draft_io import init_draft
from draftsmith.train.features import FeatureStore, extract
from draftsmith.train.loop import STATE, TrainConfig, lr_at, train, trainable


@pytest.mark.parametrize("steps, warmup", [(100, 5), (40, 2), (10, 1)])
def test_schedule_warms_up_linearly_over_5_percent_then_decays_by_cosine_to_a_tenth(steps, warmup):
    lrs = [lr_at(s, steps, 2.0) for s in range(steps)]
    assert lrs[:warmup] == pytest.approx([2.0 * (s + 1) / warmup for s in range(warmup)])
    decay = [2.0 * (0.1 + 0.45 * (1 + math.cos(math.pi * (s - warmup) / max(1, steps - warmup))))
             for s in range(warmup, steps)]
    assert lrs[warmup:] == pytest.approx(decay)
    assert max(lrs) == pytest.approx(2.0) and lr_at(steps, steps, 2.0) == pytest.approx(0.2)


@pytest.fixture
def model(tiny, tmp_path):
    return init_draft("eagle3-llama", tiny / "target", tmp_path / "d", torch.arange(0, 258, 3))


@pytest.mark.parametrize("freeze_head", [False, True])
def test_only_the_draft_trains_and_a_frozen_head_stays_out(model, freeze_head):
    model.target.requires_grad_(True)
    model.draft.requires_grad_(False)
    params = trainable(model, TrainConfig(freeze_head=freeze_head))
    assert not any(p.requires_grad for p in model.target.parameters())
    want = [p for n, p in model.draft.named_parameters() if not (freeze_head and n.startswith("lm_head."))]
    assert {id(p) for p in params} == {id(p) for p in want} and all(p.requires_grad for p in params)
    assert model.draft.lm_head.weight.requires_grad is not freeze_head


def test_a_fresh_run_starts_at_step_0(model, tiny, tmp_path):
    ids = torch.randint(0, 258, (4 * 24,), generator=torch.Generator().manual_seed(0))
    extract(model, D.windows(ids, 24), tmp_path / "f", limit=4)
    last = train(model, FeatureStore(tmp_path / "f"), tmp_path / "d", TrainConfig(steps=1, batch=2))
    assert last["step"] == 1 and math.isfinite(last["loss"]) and len(last["acc"]) == 3
    assert torch.load(tmp_path / "d" / STATE, weights_only=True)["step"] == 1


def test_ctrl_c_finishes_the_step_saves_it_and_stops(model, tiny, tmp_path, monkeypatch):
    # a KeyboardInterrupt in the middle of a step could land between the optimizer's updates; Ctrl-C lost every
    # step since the last save. Now the first one finishes the step, saves it, then stops with KeyboardInterrupt
    import os
    import signal

    import draftsmith.train.loop as loop

    ids = torch.randint(0, 258, (4 * 24,), generator=torch.Generator().manual_seed(0))
    extract(model, D.windows(ids, 24), tmp_path / "f", limit=4)
    real, calls = loop.ttt_losses, []

    def step(*a, **k):   # Ctrl-C pressed during the third step
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*a, **k)

    monkeypatch.setattr(loop, "ttt_losses", step)
    before = signal.getsignal(signal.SIGINT)
    logged = []
    with pytest.raises(KeyboardInterrupt):
        train(model, FeatureStore(tmp_path / "f"), tmp_path / "d", TrainConfig(steps=8, batch=2, save_every=100),
              log=logged.append)
    assert len(calls) == 3 and torch.load(tmp_path / "d" / STATE, weights_only=True)["step"] == 3
    assert "stopped at step 3/8 by Ctrl-C, saved" in logged[-1]
    assert signal.getsignal(signal.SIGINT) is before   # the handler is put back
