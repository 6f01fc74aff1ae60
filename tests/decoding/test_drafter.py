"""The tree expander's inputs to each draft forward, read off a recording stand-in for the draft: each node's
parent state, its scratch row (none in a finished row), its depth and its scratch ancestry."""
import torch

from draftsmith.decoding.drafter import TreeExpander


class Recorder:
    """A draft forward whose output state is the token it read, so a child's input state names its parent."""

    def __init__(self, vocab: int = 5):
        self.calls, self.vocab = [], vocab

    def __call__(self, tokens, hidden, rows, pos, anc, from_target=False):
        self.calls.append(dict(hidden=hidden[..., 0].clone(), rows=rows.clone(), pos=pos.clone(), anc=anc.clone()))
        return tokens.float()[..., None], torch.zeros(*tokens.shape, self.vocab)


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
