"""target_probs against transformers' warpers (Temperature -> TopK -> TopP, as generate(do_sample=True) builds them,
on float32 logits), found by an oracle hunt of round 27."""
import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from draftsmith.decoding.sampling import target_probs


def hf_probs(logits, temperature, top_p=1.0, top_k=0):
    x = logits.to(torch.float32).clone()
    if temperature != 1.0:
        x = TemperatureLogitsWarper(temperature)(None, x)
    if top_k:
        x = TopKLogitsWarper(top_k)(None, x)
    if top_p < 1.0:
        x = TopPLogitsWarper(top_p)(None, x)
    return torch.softmax(x, dim=-1)


@pytest.mark.parametrize("top_p, top_k", [(1.0, 2), (0.93, 0)])
def test_logits_an_ulp_apart_rank_as_they_are(top_p, top_k):
    """Ranked by logits - max, 1e-8 and 2e-8 tied once shifted by 3.0: top_k 2 kept three tokens and top_p 0.93 the
    smaller logit (id 1) instead of the larger."""
    logits = torch.tensor([[3.0, 1e-8, 2e-8]])
    got, want = target_probs(logits, 1.0, top_p, top_k), hf_probs(logits, 1.0, top_p, top_k)
    assert torch.equal(got > 0, want > 0) and bool(got[0, 2] > 0) and bool(got[0, 1] == 0), got.tolist()
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("temperature, top_p, top_k", [(1.0, 0.9, 0), (0.7, 0.95, 0), (0.8, 0.9, 50)])
def test_bfloat16_nuclei_hold_the_logits_transformers_keeps(temperature, top_p, top_k):
    """bf16 logits tie in runs, and the nucleus boundary falls inside one on most rows: which of the tied ids
    transformers keeps is its unstable sort's (draftsmith keeps the lowest, on every device), so the kept logits are
    compared as values, with their probabilities."""
    g = torch.Generator().manual_seed(0)
    V = 32000
    logits = (torch.randn(8, V, generator=g) * 2.5 + torch.linspace(0, 6, V)[torch.randperm(V, generator=g)])
    logits = logits.bfloat16()
    got, want = target_probs(logits, temperature, top_p, top_k), hf_probs(logits, temperature, top_p, top_k)
    for row in range(8):
        mine, theirs = (logits[row][p[row] > 0].float().sort().values for p in (got, want))
        assert torch.equal(mine, theirs), row
        torch.testing.assert_close(got[row][got[row] > 0].sort().values, want[row][want[row] > 0].sort().values,
                                   atol=1e-6, rtol=0)
