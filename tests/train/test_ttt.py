"""The TTT loss itself, against an oracle: the draft's head logits are recorded while ``ttt_losses`` runs, and the
loss and accuracies are recomputed from them with torch's own cross-entropy (a loss that falls during training
cannot tell a sign flip or a wrong normalisation: both fall too)."""
import pytest
import torch
import torch.nn.functional as F

from draftsmith.train.draft_io import init_draft
from draftsmith.train.features import target_features
from draftsmith.train.ttt import ttt_losses

V, B, S, STEPS, DECAY = 258, 2, 12, 3, 0.8


@pytest.fixture(scope="module")
def setup(tiny, tmp_path_factory):
    kept = torch.arange(0, V, 3)                                   # 86 kept ids; 257 lies above the largest
    model = init_draft("eagle3-llama", tiny / "target", tmp_path_factory.mktemp("ttt") / "d", kept)
    with torch.no_grad():
        for p in model.draft.parameters():   # a draft whose predictions differ by position and batch row
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.05)
    ids = torch.randint(0, V, (B, S), generator=torch.Generator().manual_seed(0))
    return model, kept, target_features(model.target, ids, model.draft.taps)


def _labels(top: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """The batch's labels with the edge cases in place: the largest kept id, an id above every kept id (257), and
    three labels inside the draft vocabulary at step 0 (labels top[:, 1:]), exactly one at step 1, none at step 2."""
    top = top.clone()
    top[:, 1:] = 257
    top[:, 1] = kept[-1]
    top[1, 2] = kept[4]
    return top


def _recorded(model, monkeypatch):
    logits = []
    head = model.draft.head_logits

    def record(*a, **k):
        out = head(*a, **k)
        logits.append(out.detach().float())
        return out

    monkeypatch.setattr(model.draft, "head_logits", record)
    return logits


def _oracle(model, batch, kept, logits, labels):
    top, loss, acc = batch["top"].long(), 0.0, []
    T = top.shape[1] - len(logits)
    for s, z in enumerate(logits):                                  # z [B, T, Vd]
        want = top[:, 1 + s: 1 + s + T].contiguous()
        inside = torch.isin(want, kept)
        index = torch.where(inside, torch.searchsorted(kept, want), -100)
        if labels == "hard":
            ce = F.cross_entropy(z.transpose(1, 2), index, ignore_index=-100, reduction="none")
        else:
            p = model.target.logits(batch["hidden"][:, 1 + s: 1 + s + T].float())[..., kept].softmax(-1)
            ce = F.cross_entropy(z.transpose(1, 2), p.transpose(1, 2), reduction="none") * inside
        loss += DECAY**s * (ce.sum() / inside.sum() if inside.any() else 0.0)
        acc.append((kept[z.argmax(-1)] == want).float().mean().item())
    return loss, acc


@pytest.mark.parametrize("labels", ["hard", "soft"])
def test_loss_and_accuracy_equal_cross_entropy_on_the_recorded_logits(setup, labels, monkeypatch):
    model, kept, feats = setup
    batch = {**feats, "top": _labels(feats["top"], kept)}
    logits = _recorded(model, monkeypatch)
    with torch.no_grad():
        loss, acc = ttt_losses(model, batch, STEPS, DECAY, kept, labels)
        want, want_acc = _oracle(model, batch, kept, logits, labels)
    assert len(logits) == STEPS and torch.isfinite(loss)
    assert loss.item() == pytest.approx(float(want), rel=1e-5)
    assert acc == pytest.approx(want_acc)


def test_hard_and_soft_labels_differ(setup):
    model, kept, feats = setup
    with torch.no_grad():
        hard, soft = (ttt_losses(model, feats, 2, DECAY, kept, k)[0] for k in ("hard", "soft"))
    assert hard.item() != pytest.approx(soft.item(), rel=1e-3)


def test_unknown_labels_are_refused(setup):
    model, kept, feats = setup
    with pytest.raises(ValueError, match="'soft' or 'hard', not 'kl'"):
        ttt_losses(model, feats, 1, DECAY, kept, "kl")


def test_kept_defaults_to_the_drafts_vocabulary(setup):
    model, kept, feats = setup
    with torch.no_grad():
        given, default = (ttt_losses(model, feats, 2, DECAY, k)[0] for k in (kept, None))
    assert torch.equal(given, default)
