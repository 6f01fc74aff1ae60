"""What each draft forward and the verification forward are given, read off recording stand-ins: each node's
parent state, its scratch row (none in a finished row), its depth and its scratch ancestry."""
from types import SimpleNamespace

import torch

from draftsmith.decoding import engine
from draftsmith.decoding.drafter import TreeExpander
from draftsmith.decoding.modes import Plan
from draftsmith.decoding.tree import chain_tree


class Recorder:
    """A draft forward whose output state is the token it read, so a child's input state names its parent."""

    def __init__(self, vocab: int = 5):
        self.calls, self.vocab = [], vocab

    def __call__(self, tokens, hidden, rows, pos, anc, from_target=False):
        self.calls.append(dict(hidden=hidden[..., 0].clone(), rows=rows.clone(), pos=pos.clone(), anc=anc.clone()))
        return tokens.float()[..., None], torch.zeros(*tokens.shape, self.vocab)


class TargetRecorder:
    """A target forward that records the rows it was given (and what its pool advanced by); logits all zero."""

    def __init__(self, vocab: int = 7):
        self.vocab, self.rows, self.advanced = vocab, None, None
        self.pool = SimpleNamespace(fused=False, advance=lambda counts: setattr(self, "advanced", counts.tolist()))

    def __call__(self, tokens, rows, depth, mask, hand_over=True):
        self.rows, self.hand_over = rows.tolist(), hand_over
        return torch.zeros(*tokens.shape, self.vocab), None


def test_each_expansion_reads_its_parents_rows_and_ancestry():
    k, steps = 2, 3
    run = Recorder()
    active = torch.tensor([True, False])
    expand = TreeExpander(run, torch.full((2, 1), -7.0), k, steps, active)
    # level 0: the root's children are candidates 0, 1; both expanded
    expand(torch.tensor([[0, 1], [0, 1]]), torch.tensor([[10, 11], [20, 21]]))
    # level 1: candidates 2, 3 are node 0's children and 4, 5 node 1's (k per frontier node); expand 3 and 4
    expand(torch.tensor([[3, 4], [2, 5]]), torch.tensor([[12, 13], [22, 23]]))
    first, second = run.calls
    assert first["hidden"].tolist() == [[-7, -7], [-7, -7]]          # both children of the root
    assert second["hidden"].tolist() == [[10, 11], [20, 21]]          # 3 -> node 0 (token 10), 4 -> node 1
    assert first["rows"].tolist() == [[0, 1], [-1, -1]]               # a finished row writes nothing
    assert second["rows"].tolist() == [[2, 3], [-1, -1]]
    assert first["pos"].tolist() == [[0, 0]] * 2 and second["pos"].tolist() == [[1, 1]] * 2
    P = k * (steps - 1)
    assert first["anc"].shape == (2, k, P) and second["anc"].shape == (2, k, P)
    assert first["anc"][0].nonzero().tolist() == [[0, 0], [1, 1]]
    # node 0 of level 1 descends from node 0 (row 0), node 1 from node 1 (row 1); each sees its own row too
    assert second["anc"][0].nonzero().tolist() == [[0, 0], [0, 2], [1, 1], [1, 3]]
    # row 1 expands 2 (node 0's child) and 5 (node 1's child)
    assert second["hidden"][1].tolist() == [20, 21]


def test_verification_gives_a_finished_row_no_rows_to_write():
    # rows -1 send a forward's KV writes to the trash slot; a finished row keeps its region as committed
    target = TargetRecorder()
    tree = chain_tree(torch.tensor([1, 2]), torch.tensor([[3, 4], [5, 6]]))
    st = engine.State(root=torch.tensor([1, 2]), active=torch.tensor([True, False]))
    engine.verify(target, st, tree, None, None, engine.Settings(max_new_tokens=4), None)
    assert target.rows == [[0, 1, 2], [-1, -1, -1]]


def test_a_target_only_step_gives_a_finished_row_no_row_to_write():
    target = TargetRecorder()
    engine.decode_step(target, engine.Settings(max_new_tokens=4), torch.tensor([1, 2]), torch.tensor([True, False]),
                       None)
    assert target.rows == [[0], [-1]] and target.advanced == [1, 0]
    assert target.hand_over is False   # nobody drafts from a target-only step: no taps gathered


def test_each_uniform_of_a_sampled_step_is_used_once(monkeypatch):
    # a uniform shared by two draws correlates them: the draft's tokens would no longer be independent draws from
    # their q (or the bonus from its residual), which the lossless-sampling proof assumes
    used = []
    real = engine.chain_draw

    def chain_draw(logits, u, **kw):
        used.append(u.tolist())
        return real(logits, u, **kw)

    monkeypatch.setattr(engine, "chain_draw", chain_draw)
    V, steps = 6, 3
    draft = Recorder(V)
    draft.pool, draft.model = SimpleNamespace(fused=False), SimpleNamespace(to_target=lambda z: z)
    st = engine.State(root=torch.tensor([1, 2]), active=torch.tensor([True, True]), feed=torch.zeros(2, 1),
                      dlogits=torch.zeros(2, V))
    s = engine.Settings(max_new_tokens=4, temperature=1.0)
    u = torch.tensor([[1, 2, 3], [5, 6, 7]]) / 8.0
    engine.propose(draft, st, Plan("v1", 1, steps, steps + 1, ""), s, u)
    assert used == [[1 / 8, 5 / 8], [2 / 8, 6 / 8], [3 / 8, 7 / 8]]       # node j draws with u[:, j]

    seen = {}

    def sample_verify_fixed(tree, p, q, u_nodes, u_bonus, topk):
        seen.update(nodes=u_nodes.tolist(), bonus=u_bonus.tolist())
        return SimpleNamespace(path=torch.zeros(2, 3, dtype=torch.long))   # the overflow check reads the path

    monkeypatch.setattr(engine, "sample_verify_fixed", sample_verify_fixed)
    tree = chain_tree(st.root, torch.tensor([[3, 4], [5, 0]]))
    u = torch.arange(6.0).view(2, 3) / 8                                # D * topk + 1 = 3 per row
    engine.verify(TargetRecorder(V), st, tree, None, Plan("v1", 1, 2, 3, ""), s, u)
    assert seen == {"nodes": [[[0.0], [1 / 8]], [[3 / 8], [4 / 8]]], "bonus": [2 / 8, 5 / 8]}
