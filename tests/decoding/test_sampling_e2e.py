"""Invariant 10 end to end: speculative sampling keeps the target's distribution.

The second new token is the first one that goes through verification (the first is sampled at prefill). Its
exact marginal under the target, sum_t1 p(t1) p(t2 | t1), is computed from the target model directly; the
speculative runs (sampled chain, deterministic top-k tree) and the baseline are each checked against it with a
chi-squared goodness-of-fit test (p-value > 1e-3) and a total-variation bound (< 0.05 with N = 3000 draws on a
vocabulary of 8)."""
import pytest
import torch
from scipy.stats import chisquare

import draftsmith
from draftsmith.decoding.sampling import target_probs
from draftsmith.testing import write_eagle1, write_target

N, V, PROMPT = 3000, 8, [1, 2, 3]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("small")
    write_target(root / "t", "llama", vocab_size=V, num_hidden_layers=2, init_std=0.4, seed=11)
    write_eagle1(root / "d", root / "t", std=0.3, seed=12)
    return draftsmith.assemble("eagle1-llama", target=root / "t", draft=root / "d", dtype="float64")


def exact_second(model, temperature, top_k):
    def probs(ids):
        ids = torch.tensor([ids])
        hidden, _ = model.target(ids, torch.arange(ids.shape[1])[None])
        return target_probs(model.target.logits(hidden)[0, -1], temperature, top_k=top_k)

    with torch.inference_mode():
        p1 = probs(PROMPT)
        return sum(p1[t] * probs(PROMPT + [t]) for t in range(V))


def counts(outs):
    return torch.bincount(torch.tensor([o.token_ids[1] for o in outs]), minlength=V).double()


@pytest.mark.parametrize("temperature,top_k", [(1.0, 0), (0.7, 4)])
@pytest.mark.parametrize("how", ["baseline", "sampled-chain", "topk-tree", "topk-past-the-nodes"])
def test_second_token_follows_the_target(small, how, temperature, top_k):
    want = exact_second(small, temperature, top_k)
    # 3 tokens: the step that emits the second one can also emit an accepted draft token, which stats count
    kw = dict(max_new_tokens=3, temperature=temperature, top_k=top_k, seed=123, stop=[])
    if how == "baseline":
        outs = small.generate_baseline([PROMPT] * N, **kw | {"max_new_tokens": 2})
    elif how == "sampled-chain":
        outs = small.generate([PROMPT] * N, topk=1, steps=3, **kw)
    elif how == "topk-tree":
        outs = small.generate([PROMPT] * N, topk=3, steps=2, draft_tokens=5, **kw)
    else:  # more siblings per node than the tree has nodes: verification still reads every child column
        outs = small.generate([PROMPT] * N, topk=4, steps=2, draft_tokens=3, **kw)
    got = counts(outs)
    keep = want > 0
    assert got[~keep].sum() == 0                                   # never a token the target cannot emit
    expected = want[keep] * N
    assert chisquare(got[keep].numpy(), expected.numpy() * got[keep].sum().item() / expected.sum().item()).pvalue > 1e-3
    assert 0.5 * (got / N - want).abs().sum() < 0.05
    if how != "baseline":
        assert outs[0].stats.accepted_per_position  # the draft's proposals were accepted sometimes
