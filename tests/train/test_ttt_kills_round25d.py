"""Mutation survivors of train/ttt.py (round 25d): the unrolled TTT loss and accuracies against a plain loop written
here, which decodes every anchor's chain one token at a time through a growing cache (the way a depth-s tree node is
drafted at inference), with the loss and accuracy computed by hand from its logits. Unlike test_ttt.py's oracle
(which recomputes the loss from the logits ttt_losses itself produced), this one also pins what the draft is fed at
each step: the tokens, the positions, the step mask (ttt_mask) and the fed-back state."""
import pytest
import torch

from draftsmith.components.attention import KVBatch
from draftsmith.train.draft_io import init_draft
from draftsmith.train.features import target_features
from draftsmith.train.ttt import ttt_losses, ttt_mask

V, B, S, STEPS, DECAY = 258, 2, 11, 3, 0.7
NOT_KEPT = 257                          # EAGLE-3 keeps every third id: 257 lies above them all


class Chain:
    """A plain cache: each call appends its K/V rows; a query attends to every row written so far."""

    def __init__(self, batch: int, rows=None):
        self.B, self.rows = batch, rows if rows is not None else {}

    def write(self, layer, slots, **new):
        self.rows.setdefault(layer, []).append({n: t.reshape(self.B, -1, *t.shape[1:]) for n, t in new.items()})

    def read(self, layer, slots):
        rows = self.rows[layer]
        return {n: torch.cat([r[n] for r in rows], 1) for n in rows[0]}

    def first(self, n: int) -> "Chain":
        return Chain(self.B, {layer: rows[:n] for layer, rows in self.rows.items()})


def _one(model, cache, token, feed, position, from_target):
    """One token through the draft: token [B], feed [B, W], at ``position`` -> (head logits [B, Vd], fed-back state)."""
    kv = KVBatch(cache, torch.zeros(B, 1, dtype=torch.long), None, None)
    pos = torch.full((B, 1), position, dtype=torch.long)
    out, back = model.draft(token[:, None], feed[:, None], pos, kv, embed=model.draft_embed, from_target=from_target)
    return model.draft.head_logits(out, model.draft_head)[:, 0].float(), back[:, 0]


def _plain_loop(model, batch, steps, decay, kept, labels):
    ids, top = batch["ids"].long(), batch["top"].long()
    T = ids.shape[1] - steps
    feats = batch["aux"] if model.draft.taps else batch["hidden"]
    z = torch.zeros(steps, B, T, len(kept))
    prefix, fed = Chain(B), []
    for i in range(T):          # step 0: anchor i reads token i+1 at position i with the target's state at i
        z[0, :, i], back = _one(model, prefix, ids[:, i + 1], feats[:, i], i, True)
        fed.append(back)
    for i in range(T):          # steps 1..: the chain after anchor i, over the committed prefix 0..i
        chain, back = prefix.first(i + 1), fed[i]
        for s in range(1, steps):
            z[s, :, i], back = _one(model, chain, ids[:, i + 1 + s], back, i + s, False)
    loss, acc = 0.0, []
    for s in range(steps):
        want = top[:, 1 + s: 1 + s + T]
        logq = z[s].log_softmax(-1)
        inside = torch.tensor([[int(w) in set(kept.tolist()) for w in row] for row in want])
        if labels == "hard":
            index = {int(k): j for j, k in enumerate(kept)}
            ce = torch.tensor([[-float(logq[b, t, index[int(want[b, t])]]) if inside[b, t] else 0.0
                                for t in range(T)] for b in range(B)])
        else:
            p = model.target.logits(batch["hidden"][:, 1 + s: 1 + s + T].float())[..., kept].softmax(-1)
            ce = -(p * logq).sum(-1)
        counted = int(inside.sum())
        loss += decay**s * (float((ce * inside).sum()) / counted if counted else 0.0)
        acc.append(sum(int(kept[z[s, b, t].argmax()]) == int(want[b, t]) for b in range(B) for t in range(T))
                   / (B * T))
    return loss, acc


@pytest.fixture(scope="module", params=["eagle3-llama", "eagle1-llama"])
def setup(request, tiny, tmp_path_factory):
    model = init_draft(request.param, tiny / "target", tmp_path_factory.mktemp("ttt25d") / "d", torch.arange(0, V, 3))
    kept = model.draft.kept_ids()            # EAGLE-3: every third id; EAGLE-1 (no reduced head): every id
    with torch.no_grad():
        for p in model.draft.parameters():   # predictions that differ by position, row and step
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.2)
    ids = torch.randint(0, V, (B, S), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        feats = target_features(model.target, ids, model.draft.taps or ())
    top = feats["top"].clone()
    top[0, 1::2] = NOT_KEPT                  # every step has labels inside the draft vocabulary and outside it
    top[1, 2::3] = NOT_KEPT
    top[1, 1::3] = kept[(top[1, 1::3] // 3).clamp(max=len(kept) - 1)]
    return model, kept, {**feats, "top": top}


@pytest.mark.parametrize("labels", ["hard", "soft"])
def test_the_unrolled_loss_is_a_plain_token_by_token_chain(setup, labels):
    """sum_s decay**s * mean over the counted anchors of the cross-entropy at step s, where step s at anchor i is the
    draft decoding token i+1+s at position i+s after the target's states 0..i and its own s-1 fed-back states;
    top-1 accuracy over every anchor, counted or not."""
    model, kept, batch = setup
    with torch.no_grad():
        loss, acc = ttt_losses(model, batch, STEPS, DECAY, kept, labels)
        want, want_acc = _plain_loop(model, batch, STEPS, DECAY, kept, labels)
    assert loss.item() == pytest.approx(want, rel=1e-4)
    assert acc == pytest.approx(want_acc)


def test_one_step_is_the_plain_prefix_loss(setup):
    """steps=1: only step 0 (no fed-back state): the plain loop's step-0 loss, undecayed."""
    model, kept, batch = setup
    short = {k: v[:, :-2] for k, v in batch.items()}            # S-2 tokens: T = S-3 anchors at one step
    with torch.no_grad():
        loss, acc = ttt_losses(model, short, 1, DECAY, kept, "soft")
        want, want_acc = _plain_loop(model, short, 1, DECAY, kept, "soft")
    assert loss.item() == pytest.approx(want, rel=1e-4) and acc == pytest.approx(want_acc)


def test_the_step_mask_is_what_a_depth_s_tree_node_sees():
    """ttt_mask(B, T, s): step s at anchor i sees step 0 at anchors <= i and steps 1..s at anchor i alone."""
    T = 4
    for s in range(3):
        m = ttt_mask(2, T, s)
        assert m.shape == (2, 1, T, (s + 1) * T) and m.dtype == torch.bool
        for i in range(T):
            for step in range(s + 1):
                for j in range(T):
                    assert bool(m[1, 0, i, step * T + j]) == ((j <= i) if step == 0 else (j == i)), (s, i, step, j)
