"""Mutation survivors (round 35) of draftsmith.components.moe: the chosen weights' renormalisation adds 1e-20 to
their sum, as transformers' DeepSeek-V3 router does, so a token whose chosen sigmoid scores all underflow below it
keeps small positive weights (a subtraction would turn them negative)."""
import torch

from draftsmith.components.moe import Router
from draftsmith.components.params import MoEParams


# catches moe.py weights.sum(-1, keepdim=True) + 1e-20 -> - 1e-20
def test_a_token_whose_chosen_scores_underflow_keeps_positive_weights():
    router = Router(MoEParams(scoring="sigmoid", norm_topk_prob=True), hidden=4, experts=4, top_k=2, norm=True)
    with torch.no_grad():
        router.weight.copy_(torch.tensor([[-15.0] * 4, [-16.0] * 4, [-17.0] * 4, [-18.0] * 4]))
    x = torch.ones(1, 4, dtype=torch.float64)
    router.double()
    chosen, weights = router.choose(x)
    scores = torch.sigmoid(torch.tensor([-60.0, -64.0], dtype=torch.float64))
    assert chosen.tolist() == [[0, 1]]
    torch.testing.assert_close(weights[0], scores / (scores.sum() + 1e-20), rtol=1e-12, atol=0)
    assert (weights > 0).all()
