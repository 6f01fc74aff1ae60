"""The assembled modules (draftsmith.assembler.models) on hand-built parts whose every step shows in the numbers: a
layer that splits off a residual term of ones, a "norm" that doubles, a fusion that adds. run_layers settles the
pending term where a caller reads the stream and leaves it to cat_sums in a tap; CausalLM and DraftModel wire
their slots as the docstrings say; a reduced head maps draft id d to target id d + d2t[d]."""
import torch
from torch import nn

from draftsmith.assembler.models import CausalLM, DraftModel, run_layers
from draftsmith.components.dims import Dims
from draftsmith.components.fused import cat_sums

H = 2


class _Split(nn.Module):
    """A layer with split_forward: (x + pending, ones), i.e. forward adds one."""

    def forward(self, x, pos, kv=None, emb=None):
        return x + 1

    def split_forward(self, x, pos, kv=None, emb=None, pending=None):
        return (x if pending is None else x + pending), torch.ones_like(x)


class _Plain(nn.Module):
    """A plugin layer without split_forward that records the arguments after x it was called with."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, x, *args):
        self.calls.append(args)
        return x * 3


class _Double(nn.Module):
    """A final "norm" without add_forward: twice its input."""

    def forward(self, x):
        return 2 * x


class _SumFusion(nn.Module):
    def fuse(self, emb, hidden, from_target):
        return emb + hidden


def _dims(vocab=5):
    return Dims(hidden=H, heads=1, kv_heads=1, head_dim=H, intermediate=4, eps=1e-6, vocab=vocab, layers=1,
                config=None)


def _draft(layers=(), norm=None, **kw):
    kw = {"lm_head": None, "draft_vocab": None, "target_vocab": 6, "feed_post_norm": False, **kw}
    return DraftModel(_SumFusion(), list(layers), norm, **kw)


def _embed():
    embed = nn.Embedding(6, H)
    with torch.no_grad():
        embed.weight.copy_(torch.arange(12.0).view(6, H))
    return embed


# catches models.py:44 (pos, kv) if emb is None else (pos, kv, emb) -> emb is not None
def test_a_layer_without_split_forward_gets_the_embedding_in_a_draft_and_not_in_a_target():
    x, emb = torch.ones(1, 2, H), torch.full((1, 2, H), 7.0)
    plain = _Plain()
    out, pending, _ = run_layers([plain], x, "pos", "kv", emb)
    assert pending is None and torch.equal(out, 3 * x)
    (args,) = plain.calls
    assert args[:2] == ("pos", "kv") and len(args) == 3 and torch.equal(args[2], emb)
    plain.calls.clear()
    run_layers([plain], x, "pos", "kv")
    assert plain.calls == [("pos", "kv")]


def test_taps_capture_the_stream_at_a_layers_input_and_at_the_output_with_its_pending_add():
    # catches models.py:40 i in taps -> not in, :48 len(layers) in taps -> not in; a tap is (stream, pending add),
    # which cat_sums settles (the stream after the first layer is x + 1, its 1 still pending)
    x = torch.zeros(1, 1, H)
    out, pending, captured = run_layers([_Split(), _Split(), _Split()], x, None, taps=(1, 3))
    assert sorted(captured) == [1, 3]
    assert torch.equal(captured[1][0], torch.zeros(1, 1, H)) and torch.equal(captured[1][1], torch.ones(1, 1, H))
    assert torch.equal(cat_sums([captured[1]]), torch.ones(1, 1, H))
    assert torch.equal(cat_sums([captured[3]]), torch.full((1, 1, H), 3.0))
    assert captured[3][0] is out and captured[3][1] is pending   # the output tap: the stack's own (x, pending)
    assert torch.equal(cat_sums([captured[1], captured[3]]), torch.tensor([[[1.0, 1.0, 3.0, 3.0]]]))
    out, pending, captured = run_layers([_Split(), _Split()], x, None)
    assert captured == {} and torch.equal(out, torch.ones(1, 1, H)) and torch.equal(pending, torch.ones(1, 1, H))


# catches models.py:58 CausalLM(recurrent=False) -> True
# catches models.py:66 nn.Linear(dims.hidden, dims.vocab, bias=False) -> bias=True
def test_a_target_lm_has_a_bias_free_head_and_is_not_recurrent_unless_told():
    model = CausalLM(_dims(), [], _Double(), tie=False)
    assert model.recurrent is False and CausalLM(_dims(), [], _Double(), tie=False, recurrent=True).recurrent
    assert model.lm_head.bias is None and model.lm_head.weight.shape == (5, H)
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    tied = CausalLM(_dims(), [], _Double(), tie=True)
    assert tied.lm_head.weight is tied.model.embed_tokens.weight and tied.lm_head.bias is None


# catches models.py:77 torch.cat(..., dim=-1) -> dim=1
# catches models.py:78 add_then_norm(...)[1] -> [0]
def test_a_target_returns_the_final_normed_stream_and_its_taps_side_by_side():
    model = CausalLM(_dims(), [_Split(), _Split()], _Double(), tie=False)
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.arange(10.0).view(5, H))
    ids = torch.tensor([[1, 3, 4]])
    emb = model.model.embed_tokens.weight[ids]
    hidden, aux = model(ids, None)
    assert aux is None
    torch.testing.assert_close(hidden, 2 * (emb + 2))          # the last pending term added, then the norm
    hidden, aux = model(ids, None, taps=(0, 2))
    torch.testing.assert_close(hidden, 2 * (emb + 2))
    assert aux.shape == (1, 3, 2 * H)
    torch.testing.assert_close(aux, torch.cat([emb, emb + 2], dim=-1))


# catches models.py:95 norm or nn.Identity() -> norm and nn.Identity()
# catches models.py:96 lm_head is not None -> is None
# catches models.py:100 draft_vocab is not None -> is None
def test_a_draft_keeps_the_norm_and_head_it_is_given_and_has_a_map_only_with_a_reduced_head():
    norm, head = _Double(), nn.Linear(H, 6, bias=False)
    draft = _draft(norm=norm, lm_head=head)
    assert draft.norm is norm and draft.lm_head is head
    bare = _draft()
    assert isinstance(bare.norm, nn.Identity) and not hasattr(bare, "lm_head")
    assert not hasattr(bare, "d2t") and not hasattr(bare, "t2d") and "d2t" not in bare.state_dict()
    reduced = _draft(draft_vocab=3)
    assert reduced.d2t.shape == (3,) and reduced.d2t.dtype == torch.int64
    assert reduced.t2d.shape == (6,) and reduced.t2d.dtype == torch.bool


# catches models.py:110 hasattr(self, 't2d') and self.t2d.is_meta -> or
# catches models.py:112 index_fill_(0, ..., True) -> 1 / False
def test_reset_buffers_derives_a_missing_t2d_from_d2t_and_keeps_a_loaded_one():
    draft = _draft(draft_vocab=3)
    draft.d2t = torch.tensor([0, 2, 3])                        # draft ids 0, 1, 2 -> target ids 0, 3, 5
    draft.t2d = torch.empty(6, dtype=torch.bool, device="meta")
    draft.reset_buffers("cpu")
    assert draft.t2d.tolist() == [True, False, False, True, False, True]
    loaded = torch.tensor([True, True, False, False, False, True])
    draft.t2d = loaded
    draft.reset_buffers("cpu")
    assert draft.t2d is loaded
    bare = _draft()
    bare.reset_buffers("cpu")                                  # no reduced head: nothing to derive, no error
    assert not hasattr(bare, "t2d")


# catches models.py:145 idx + self.d2t[idx] -> idx - self.d2t[idx]
# catches models.py:150 torch.arange(...) + self.d2t -> - self.d2t
# catches models.py:155 not hasattr(self, 'd2t') -> hasattr(self, 'd2t')
# catches models.py:157 (*z.shape[:-1], self.target_vocab) -> z.shape[:1]
# catches models.py:158 index_copy_(-1, ...) -> index_copy_(1, ...)
def test_a_reduced_head_maps_draft_ids_and_logits_onto_the_target_vocabulary():
    draft = _draft(draft_vocab=3)
    draft.d2t = torch.tensor([0, 2, 3])
    assert draft.target_ids(torch.tensor([[2, 0, 1]])).tolist() == [[5, 0, 3]]
    assert draft.kept_ids().tolist() == [0, 3, 5]
    z = torch.arange(1.0, 7.0).view(1, 2, 3)
    full = draft.to_target(z)
    inf = float("-inf")
    assert full.tolist() == [[[1.0, inf, inf, 2.0, inf, 3.0], [4.0, inf, inf, 5.0, inf, 6.0]]]
    whole = _draft(lm_head=nn.Linear(H, 6, bias=False))
    assert whole.to_target(z) is z and whole.kept_ids().tolist() == list(range(6))
    assert whole.target_ids(torch.tensor([4, 1])).tolist() == [4, 1]


def test_draft_logits_norm_then_head_then_spread_over_the_target_vocabulary():
    draft = _draft(norm=_Double(), draft_vocab=3)
    draft.d2t = torch.tensor([1, 1, 1])                        # target ids 1, 2, 3
    head = nn.Linear(H, 3, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    out = torch.tensor([[[1.0, 2.0]]])
    inf = float("-inf")
    assert draft.logits(out, head).tolist() == [[[inf, 2.0, 4.0, 6.0, inf, inf]]]
    draft.head_norm = False
    assert draft.logits(out, head).tolist() == [[[inf, 1.0, 2.0, 3.0, inf, inf]]]


# catches models.py:115 DraftModel.forward(head_input=False) -> True
# catches models.py:126 self.feed_post_norm or (...) -> and
def test_a_draft_feeds_back_the_pre_or_post_norm_stream_and_hands_the_head_its_input_when_asked():
    ids, hidden = torch.tensor([[1, 2]]), torch.zeros(1, 2, H)
    emb = _embed()(ids)
    x = emb + 1                                                # the fusion's sum, through one layer that adds one
    pre = _draft([_Split()], _Double())
    got = pre(ids, hidden, None, embed=_embed(), from_target=True)
    assert len(got) == 2
    torch.testing.assert_close(got[0], x)
    torch.testing.assert_close(got[1], x)
    out, feed, head_in = pre(ids, hidden, None, embed=_embed(), from_target=True, head_input=True)
    torch.testing.assert_close(out, x)
    torch.testing.assert_close(feed, x)
    torch.testing.assert_close(head_in, 2 * x)
    post = _draft([_Split()], _Double(), feed_post_norm=True)
    got = post(ids, hidden, None, embed=_embed(), from_target=True)
    assert len(got) == 2
    torch.testing.assert_close(got[0], x)
    torch.testing.assert_close(got[1], 2 * x)
    raw = _draft([_Split()], _Double(), head_norm=False)
    out, feed, head_in = raw(ids, hidden, None, embed=_embed(), from_target=True, head_input=True)
    for t in (out, feed, head_in):
        torch.testing.assert_close(t, x)


class _PosFusion(nn.Module):
    takes_positions = True

    def fuse(self, emb, hidden, from_target, pos):
        return emb + hidden + pos.unsqueeze(-1)


def test_a_fusion_that_takes_positions_gets_them_and_another_does_not():
    # catches models.py:123 getattr(self.fc, 'takes_positions', False) -> True
    ids, hidden, pos = torch.tensor([[1, 2]]), torch.zeros(1, 2, H), torch.tensor([[10, 20]])
    emb = _embed()(ids)
    plain = _draft()
    torch.testing.assert_close(plain(ids, hidden, pos, embed=_embed(), from_target=True)[0], emb)
    with_pos = DraftModel(_PosFusion(), [], None, lm_head=None, draft_vocab=None, target_vocab=6,
                          feed_post_norm=False)
    got = with_pos(ids, hidden, pos, embed=_embed(), from_target=True)[0]
    torch.testing.assert_close(got, emb + torch.tensor([[[10.0], [20.0]]]))


class _CountingNorm(_Double):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return super().forward(x)


# catches models.py:126 head_input and self.head_norm -> head_input or self.head_norm (the outputs agree: the
# mutant runs the final norm on every draft step where nothing reads it, a wasted kernel)
def test_a_draft_runs_its_final_norm_only_where_the_feed_or_the_head_reads_it():
    ids, hidden = torch.tensor([[1, 2]]), torch.zeros(1, 2, H)
    for feed_post_norm, head_input, head_norm, runs in [(False, False, True, 0), (False, True, False, 0),
                                                       (False, True, True, 1), (True, False, False, 1)]:
        norm = _CountingNorm()
        draft = _draft([_Split()], norm, feed_post_norm=feed_post_norm, head_norm=head_norm)
        draft(ids, hidden, None, embed=_embed(), from_target=True, head_input=head_input)
        assert norm.calls == runs, (feed_post_norm, head_input, head_norm)
