"""TTT's soft labels are the target's distribution over the kept ids: for a target whose logits are capped by tanh
(Gemma-2 / Gemma-3's final_logit_softcapping), the capped logits the target decodes with, not the lm_head's raw ones
(the hidden states times the head's rows, uncapped, gave another distribution; greedy labels were unchanged)."""
import pytest
import torch

from draftsmith.testing import write_target
from draftsmith.train.draft_io import init_draft
from draftsmith.train.features import target_features
from draftsmith.train.ttt import ttt_losses
from test_ttt import _oracle, _recorded

B, S, STEPS, DECAY = 2, 12, 2, 0.8


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    root = tmp_path_factory.mktemp("ttt_cap")
    target = write_target(root / "target", "gemma2", num_hidden_layers=8, tokenizer=True,
                          final_logit_softcapping=1.0)   # a cap the raw logits pass
    model = init_draft("eagle3-llama", target, root / "d", None)
    kept = model.draft.kept_ids()
    vocab = model.target.model.embed_tokens.num_embeddings
    ids = torch.randint(0, vocab, (B, S), generator=torch.Generator().manual_seed(0))
    return model, kept, target_features(model.target, ids, model.draft.taps)


def test_the_target_caps_its_logits(capped):
    model, _, feats = capped
    raw = model.target.lm_head(feats["hidden"])
    assert model.target.logit_cap == 1.0 and raw.abs().max() > 1.5   # the cap binds
    assert model.target.logits(feats["hidden"]).abs().max() <= 1.0


def test_soft_labels_are_the_capped_target_distribution(capped, monkeypatch):
    model, kept, feats = capped
    logits = _recorded(model, monkeypatch)
    with torch.no_grad():
        loss, acc = ttt_losses(model, feats, STEPS, DECAY, kept, "soft")
        want, want_acc = _oracle(model, feats, kept, logits, "soft")   # softmax of target.logits over kept
    assert loss.item() == pytest.approx(float(want), rel=1e-5)
    assert acc == pytest.approx(want_acc)
