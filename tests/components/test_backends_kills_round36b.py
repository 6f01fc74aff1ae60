"""Mutation round 36 (components/backends.py, the attention-sinks change): ``flash`` sends a masked call to
FlexAttention whether or not it has sinks, even where flash-attn could take the shapes (flash-attn only computes
plain causal attention); sdpa's sinks path reads the kv heads from k's head dimension, not its batch one (a
batch as wide as the query heads, and wider than the kv heads, catches either read)."""
import pytest
import torch

from draftsmith.components import backends


def test_a_masked_call_without_sinks_never_reaches_flash_attn(monkeypatch):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, t, 8, generator=g) for t in (3, 6, 6))
    mask = torch.rand(1, 1, 3, 6, generator=g) < 0.6
    mask[..., -1] = True
    want = backends.eager(q, k, v, mask, 8**-0.5)
    monkeypatch.setattr(backends, "_flash_takes", lambda *_: True)   # flash-attn is not installed: never imported
    torch.testing.assert_close(backends.flash(q, k, v, mask, 8**-0.5), want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("mask", [None, "tree"])
def test_sdpa_sinks_with_a_batch_as_wide_as_the_query_heads(mask):
    B, H, KV, T, S = 4, 4, 2, 3, 7
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(B, n, t, 8, generator=g, dtype=torch.float64) for n, t in ((H, T), (KV, S), (KV, S)))
    if mask == "tree":
        mask = (torch.rand(B, 1, T, S, generator=g) < 0.5) | backends.causal_mask(T, S).tril(S - T).logical_and(
            ~backends.causal_mask(T, S).tril(S - T - 1))
    sinks = torch.tensor([1.5, -2.0, 0.4, 3.0], dtype=torch.float64)
    want = backends.eager(q, k, v, mask, 8**-0.5, sinks=sinks)
    assert (want - backends.eager(q, k, v, mask, 8**-0.5)).abs().max() > 1e-2
    torch.testing.assert_close(backends.sdpa(q, k, v, mask, 8**-0.5, sinks=sinks), want, atol=1e-12, rtol=0)
