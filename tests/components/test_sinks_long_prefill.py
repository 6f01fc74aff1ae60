"""sdpa's attention sinks without a mask per head: the sink is one more key (first, its score each head's sink
through an extra head-size column, its value zeros), so a long prefill's causal call stays mask-free (a dummy first
query keeps T == S SDPA's is_causal) and a masked call's mask gains one column, no heads. It equals transformers'
gpt-oss eager attention (the eager backend) for every shape around the dummy query and the sink key, causal, windowed
and masked (trees, padded batches, a query with no key); no allocation grows as heads x T x S."""
import pytest
import torch
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile

from draftsmith.components import backends
from draftsmith.components.backends import causal_mask
from draftsmith.components.sliding import windowed

D = 8
SINKS = torch.tensor([2.0, -1.5, 0.3, 4.0, -0.7, 1.1], dtype=torch.float64)   # one per head, all different


def qkv(B, H, KV, T, S, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, n, t, D, generator=g, dtype=dtype) for n, t in ((H, T), (KV, S), (KV, S))]


def check(q, k, v, mask, atol=1e-12, backend=backends.sdpa):
    sinks = SINKS[:q.shape[1]].to(q.dtype)
    want = backends.eager(q, k, v, mask, D**-0.5, sinks=sinks)
    got = backend(q, k, v, mask, D**-0.5, sinks=sinks)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=atol, rtol=0)
    plain = backends.eager(q, k, v, mask, D**-0.5)   # NaN where a query sees no key
    assert (plain - want).nan_to_num(1.0).abs().max() > 1e-3   # the sinks matter here


@pytest.mark.parametrize("T, S", [(1, 1), (2, 2), (1, 9), (2, 9), (8, 9), (9, 9), (65, 65), (300, 300), (3, 600),
                                  (600, 600)])
@pytest.mark.parametrize("H, KV", [(4, 2), (6, 6), (6, 1)])
def test_causal_calls_equal_eager(T, S, H, KV):
    check(*qkv(2, H, KV, T, S), None)


@pytest.mark.parametrize("T, S", [(1, 7), (5, 7), (7, 7), (300, 300)])
def test_float32_equals_eager(T, S):
    check(*qkv(2, 6, 2, T, S, torch.float32), None, atol=1e-5)
    mask = causal_mask(T, S)[None, None].expand(2, 1, T, S)
    check(*qkv(2, 6, 2, T, S, torch.float32), mask, atol=1e-5)


def padded(B, T, S, seed=1):
    """[B, 1, T, S]: each row left-padded by its own count of keys (a padded batch), causal after that."""
    pads = torch.randint(0, S // 2, (B,), generator=torch.Generator().manual_seed(seed))
    keys = torch.arange(S)
    return (causal_mask(T, S)[None] & (keys >= pads.view(B, 1, 1)))[:, None]


@pytest.mark.parametrize("T, S", [(1, 10), (4, 10), (10, 10), (257, 257)])
def test_masked_calls_equal_eager(T, S):
    q, k, v = qkv(3, 4, 2, T, S, seed=2)
    check(q, k, v, padded(3, T, S))
    tree = (torch.rand(3, 1, T, S, generator=torch.Generator().manual_seed(3)) < 0.5) | padded(3, T, S)
    check(q, k, v, tree)
    shared = causal_mask(T, S)[None, None]   # one mask for the batch (a sliding window's prefill mask)
    check(q, k, v, shared)


def test_a_query_with_no_key_sees_the_sink_alone():
    """eager's softmax over [-inf.., sink] is all the sink's: the query's output is zeros, not NaN."""
    q, k, v = qkv(2, 4, 2, 5, 5)
    mask = causal_mask(5, 5)[None, None].repeat(2, 1, 1, 1)
    mask[1, 0, 2] = False
    got = backends.sdpa(q, k, v, mask, D**-0.5, sinks=SINKS[:4])
    assert got[1, :, 2].abs().max() == 0
    check(q, k, v, mask)


@pytest.mark.parametrize("S", [3, 8, 40])   # within the window (mask-free) and past it (the wrapper's mask)
def test_a_windowed_long_prefill_equals_eager(S):
    q, k, v = qkv(2, 4, 2, S, S)
    attend = windowed(backends.sdpa, 8)
    reference = windowed(backends.eager, 8)
    want = reference(q, k, v, None, D**-0.5, sinks=SINKS[:4])
    torch.testing.assert_close(attend(q, k, v, None, D**-0.5, sinks=SINKS[:4]), want, atol=1e-12, rtol=0)


@pytest.mark.parametrize("T", [2, 16])
def test_a_causal_prefill_reaches_sdpa_mask_free(monkeypatch, T):
    """T == S stays SDPA's is_causal (its fused kernels on CUDA); the sink key is attended through q and k."""
    calls = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kw):
        calls.append(kw)
        return sdpa(*args, **kw)

    monkeypatch.setattr(backends.F, "scaled_dot_product_attention", spy)
    q, k, v = qkv(1, 4, 2, T, T)
    check(q, k, v, None)
    assert calls[0]["attn_mask"] is None and calls[0]["is_causal"] is True


def _largest_allocation(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return max(e.cpu_memory_usage for e in prof.events())


@pytest.mark.parametrize("masked", [False, True])
def test_a_long_prefill_allocates_nothing_per_head_of_t_x_s(masked):
    """At 16 heads x 512 x 512 a float mask per head is 16 MiB; q is 0.5 MiB, a float mask without heads 1 MiB."""
    H, T = 16, 512
    q, k, v = qkv(1, H, 4, T, T, torch.float32)
    mask = causal_mask(T, T)[None, None] if masked else None
    sinks = torch.randn(H)
    per_head = H * T * T * 4
    assert _largest_allocation(lambda: backends.sdpa(q, k, v, mask, D**-0.5, sinks=sinks)) < per_head / 4
    # the measure sees such an allocation: eager's scores are one
    assert _largest_allocation(lambda: backends.eager(q, k, v, mask, D**-0.5, sinks=sinks)) >= per_head
