"""top_p and top_k rank tokens by their logits (a hunt of the Python API: target_probs sorted softmax(logits / T),
whose float32 values tie once T is ~1e9, and the stable sort then kept the lowest ids: generate(temperature=1e10,
top_p=1e-9) gave token 0 six times, the argmax being another). transformers' warpers, which sort the scores, are
the oracle at ordinary temperatures."""
import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from draftsmith.decoding.sampling import target_probs


def _kept(probs):
    return set(torch.nonzero(probs[0]).flatten().tolist())


@pytest.fixture
def logits():
    return torch.randn(1, 258, generator=torch.Generator().manual_seed(0)) * 3


@pytest.mark.parametrize("temperature", [1e9, 1e10, 3e38])
def test_a_huge_temperature_keeps_the_most_likely_tokens(logits, temperature):
    top = torch.sort(logits[0], descending=True).indices.tolist()
    assert _kept(target_probs(logits, temperature, 1e-9)) == {top[0]}
    assert _kept(target_probs(logits, temperature, 0.5)) == set(top[:129])   # near uniform: half of 258 tokens
    assert _kept(target_probs(logits, temperature, 1.0, 5)) == set(top[:5])


@pytest.mark.parametrize("temperature, top_p, top_k", [(0.7, 0.9, 0), (1.0, 0.5, 0), (2.0, 0.95, 20), (1.3, 1.0, 7)])
def test_the_kept_tokens_and_their_probabilities_are_transformers(logits, temperature, top_p, top_k):
    scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_k:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1:
        scores = TopPLogitsWarper(top_p)(None, scores)
    want = torch.softmax(scores, dim=-1)
    got = target_probs(logits, temperature, top_p, top_k)
    assert _kept(got) == _kept(want)
    torch.testing.assert_close(got, want)
