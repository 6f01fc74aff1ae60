"""Attention backends agree with the eager reference; the choice is a registered component."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import draftsmith
from draftsmith.components import backends


@settings(max_examples=25)
@given(B=st.integers(1, 3), T=st.integers(1, 9), extra=st.integers(0, 12), kv=st.sampled_from([1, 2, 4]),
       seed=st.integers(0, 2**16), causal=st.booleans())
def test_flex_matches_eager(B, T, extra, kv, seed, causal):
    g = torch.Generator().manual_seed(seed)
    S = T if causal else T + extra  # mask=None means causal over T == S
    q = torch.randn(B, 4, T, 16, generator=g, dtype=torch.float64)
    k, v = (torch.randn(B, kv, S, 16, generator=g, dtype=torch.float64) for _ in range(2))
    if causal:
        mask = None
    else:
        mask = torch.rand(B, 1, T, S, generator=g) > 0.5
        mask[..., 0] = True
    want = backends.eager(q, k, v, mask, 0.25)
    for fn in (backends.flex, backends.sdpa, backends.auto):
        assert torch.allclose(fn(q, k, v, mask, 0.25), want, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("B,T,S,masked", [(1, 1, 40, True), (3, 1, 17, False), (2, 1, 1, False), (1, 3, 9, True)])
def test_sdpa_runs_one_low_precision_query_on_cpu_in_float32(monkeypatch, dtype, B, T, S, masked):
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(backends.F, "scaled_dot_product_attention",
                        lambda q, *a, **kw: seen.append(q.dtype) or real(q, *a, **kw))
    g = torch.Generator().manual_seed(S)
    q = torch.randn(B, 6, T, 16, generator=g).to(dtype)
    k, v = (torch.randn(B, 2, S, 16, generator=g).to(dtype) for _ in range(2))
    mask = (torch.rand(B, 1, T, S, generator=g) > 0.4) | (torch.arange(S) == 0) if masked else None
    out = backends.sdpa(q, k, v, mask, 0.25)
    assert seen == [torch.float32 if T == 1 else dtype] and out.dtype == dtype and out.shape == (B, 6, T, 16)
    want = backends.eager(q.double(), k.double(), v.double(), mask, 0.25)
    torch.testing.assert_close(out.double(), want, atol=1e-2, rtol=1e-2)


def test_flash_backend_is_refused_without_flash_attn(monkeypatch):
    monkeypatch.setattr(backends, "has_flash_attn", lambda: False)
    from draftsmith.errors import OptionError

    with pytest.raises(OptionError, match="flash-attn"):   # this machine's lack: exit 1, a message
        draftsmith.default_registry().build("attn_backend", "flash")


@pytest.mark.gpu
def test_cuda_backends_match_eager():
    q = torch.randn(2, 4, 8, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 20, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    mask = torch.rand(2, 1, 8, 20, device="cuda") > 0.3
    mask[..., 0] = True
    want = backends.eager(q.float(), k.float(), v.float(), mask, 0.125)
    for fn in (backends.flex, backends.sdpa, backends.auto):
        assert torch.allclose(fn(q, k, v, mask, 0.125).float(), want, atol=3e-2)
    if backends.has_flash_attn():
        assert torch.allclose(backends.flash(q, k[:, :, :8], v[:, :, :8], None, 0.125).float(),
                              backends.eager(q.float(), k[:, :, :8].float(), v[:, :, :8].float(), None, 0.125),
                              atol=3e-2)


@settings(max_examples=30)
@given(B=st.integers(1, 2), T=st.integers(1, 10), S_extra=st.integers(0, 14), seed=st.integers(0, 2**16),
       density=st.sampled_from([0.0, 0.5, 0.9, 1.0]))
def test_block_mask_tiles_agree_with_torchs_create_block_mask(B, T, S_extra, seed, density):
    from torch.nn.attention.flex_attention import create_block_mask

    S = T + S_extra
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(B, 1, T, S, generator=g) < density
    ours = backends.block_mask_from_bool(mask, block=4)
    m = mask[:, 0]
    theirs = create_block_mask(lambda b, h, qi, ki: m[b, qi, ki], B, None, T, S, device="cpu", BLOCK_SIZE=4)
    assert torch.equal(ours.to_dense(), theirs.to_dense())             # partial | full tiles
    assert torch.equal(ours.full_kv_num_blocks, theirs.full_kv_num_blocks)
    assert torch.equal(ours.kv_num_blocks, theirs.kv_num_blocks)
    q = torch.randn(B, 2, T, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(B, 2, S, 8, generator=g, dtype=torch.float64) for _ in range(2))
    mask[..., 0] = True
    assert torch.allclose(backends.flex(q, k, v, mask, 0.3), backends.eager(q, k, v, mask, 0.3), atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_additive_mask_is_what_sdpa_makes_of_a_boolean_one(dtype):
    """On CUDA sdpa hands SDPA the additive twin of the boolean mask, made once per forward (per_mask)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 3, 8, generator=g).to(dtype) for _ in range(3))
    mask = torch.rand(2, 1, 3, 3, generator=g) < 0.6
    mask[..., 0] = True
    F = torch.nn.functional
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=backends.additive(mask, dtype)),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=mask), rtol=0, atol=0)
    made = []
    build = lambda m, key: made.append(key) or backends.additive(m, key)  # noqa: E731
    first = backends.per_mask(mask, dtype, build)
    assert backends.per_mask(mask, dtype, build) is first and made == [dtype]     # once per mask object and key
    assert backends.per_mask(mask.clone(), dtype, build) is not first and len(made) == 2


@pytest.mark.parametrize("B", [2, 3])
def test_flex_takes_a_mask_the_batch_shares(B):
    """A [1, 1, T, S] mask (a sliding window's prefill mask is made once for the batch) over a batch of B: the
    block mask is made at the batch's size (its mask_mod indexed row b of a one-row mask: IndexError)."""
    g = torch.Generator().manual_seed(B)
    q = torch.randn(B, 2, 5, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(B, 1, 9, 8, generator=g, dtype=torch.float64) for _ in range(2))
    mask = (backends.causal_mask(5, 9) & (torch.arange(9) >= 2))[None, None]   # one mask for every row
    assert torch.allclose(backends.flex(q, k, v, mask, 0.3), backends.eager(q, k, v, mask, 0.3), atol=1e-10)


@pytest.mark.parametrize("dtype, qk, v, takes", [(torch.bfloat16, 64, 64, True), (torch.float16, 256, 256, True),
                                                 (torch.float32, 64, 64, False), (torch.bfloat16, 192, 128, False),
                                                 (torch.bfloat16, 288, 288, False)],
                         ids=["bf16", "fp16-256", "float32", "mla", "too-wide"])
def test_flash_attn_gets_only_what_it_computes(dtype, qk, v, takes):
    """`auto` sent every causal CUDA call to flash-attn when installed: float32 models (the GPU tests' equality
    runs) and MLA's unequal head sizes would raise at prefill. Those go to SDPA / flex now."""
    assert backends.flash_computes(dtype, qk, v) is takes
