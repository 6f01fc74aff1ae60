"""Mutation round 11: components/sliding.py, components/backends.py (what runs on CPU), components/fused.py (the
eager functions and the CPU switch), specs/draft_rules.py (no survivor) and registry/checks.py. Each test kills
survivors of scripts/mutate.py; where a reference exists the code is checked against it: attention against a
plain softmax(q k^T * scale) v over an explicit mask built from positions (bottom-right causal, or the band of a
sliding window), a block mask against torch's own create_block_mask, an interleaved rotation against complex
multiplication. The tests pin a window of 1 (and none of 0), sdpa's causal bias for two or more queries over a
longer prefix, flash's routing where flash-attn takes a call, the fused switch where triton is installed, RMSNorm's
float32 upcast of half precision only, rope_kv's [B, T, 2, Hk, d] cache row and a spec source's non-empty name."""
import sys
import types
from pathlib import Path

import pytest
import torch

from draftsmith.components import backends, fused
from draftsmith.components.sliding import stated_window, windowed
from draftsmith.hooks import SpecSource
from draftsmith.registry.checks import record_problem

# ---- references ------------------------------------------------------------------------------------------------


def band(T: int, S: int, window: int | None = None) -> torch.Tensor:
    """[T, S] bool from positions: the T queries are the last T of S keys; query at p sees key k iff k <= p (and
    p - k < window)."""
    p = torch.arange(S - T, S)[:, None]
    k = torch.arange(S)[None, :]
    return (k <= p) & ((p - k < window) if window is not None else True)


def reference(q, k, v, mask, scale):
    """softmax(q k^T * scale) v over the boolean mask [.., T, S], the kv heads repeated for grouped queries."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) * scale
    return torch.einsum("bhts,bhsd->bhtd", scores.masked_fill(~mask, float("-inf")).softmax(-1), v)


def qkv(B=1, H=4, Hkv=2, T=5, S=5, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, d, generator=g, dtype=torch.float64)
    k, v = (torch.randn(B, Hkv, S, d, generator=g, dtype=torch.float64) for _ in range(2))
    return q, k, v


# ---- components/sliding.py -------------------------------------------------------------------------------------

@pytest.mark.parametrize("window, want", [(1, 1), (4, 4), (0, None), (-2, None), (True, None), (4.0, None)])
def test_a_stated_window_is_a_positive_int(window, want):
    # catches sliding.py:52 window > 0 -> window >= 0 (a window of 0 would hide every key: NaN attention) and
    # window > 0 -> window > 1 (a window of 1, each position seeing itself, is a window)
    got = stated_window({"sliding_window": window})
    assert got == want and type(got) is type(want)
    assert stated_window({"sliding_window": window, "use_sliding_window": False}) is None


@pytest.mark.parametrize("window", [1, 2, 3])
@pytest.mark.parametrize("T, S", [(1, 6), (3, 7), (6, 6)])
def test_a_window_equals_attention_over_the_band_of_positions(window, T, S):
    q, k, v = qkv(T=T, S=S, seed=window)
    got = windowed(backends.eager, window)(q, k, v, None, 0.3)
    torch.testing.assert_close(got, reference(q, k, v, band(T, S, window), 0.3))
    if window == 1:   # each query sees its own key only
        torch.testing.assert_close(got, v[:, :, S - T:].repeat_interleave(2, 1))


# ---- components/backends.py ------------------------------------------------------------------------------------

@pytest.mark.parametrize("T, S", [(2, 2), (2, 5), (3, 8), (1, 4), (1, 1)])
def test_sdpa_without_a_mask_is_bottom_right_causal(T, S):
    # catches backends.py:34 1 < T < S -> 2 < T < S (two queries over a longer prefix attended to every key)
    q, k, v = qkv(T=T, S=S, seed=T * S)
    want = reference(q, k, v, band(T, S), 0.25)
    for fn in (backends.sdpa, backends.eager):
        torch.testing.assert_close(fn(q, k, v, None, 0.25), want)


def test_a_cpu_call_hands_sdpa_the_boolean_mask_itself(monkeypatch):
    # catches backends.py:36 `mask is not None and q.is_cuda` -> `or`: the additive twin (and its cache entry) is
    # made for CUDA only; on CPU SDPA gets the boolean mask as given
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(backends.F, "scaled_dot_product_attention",
                        lambda q, k, v, attn_mask, **kw: seen.append(attn_mask) or real(q, k, v, attn_mask, **kw))
    q, k, v = qkv(T=3, S=6)
    mask = band(3, 6)[None, None] & (torch.arange(6) != 1)
    torch.testing.assert_close(backends.sdpa(q, k, v, mask, 0.25), reference(q, k, v, mask, 0.25))
    assert len(seen) == 1 and seen[0] is mask


def test_flash_gives_flash_attn_the_causal_calls_only(monkeypatch):
    # catches backends.py:151 `mask is not None or ...` -> `mask is None or ...` (where flash-attn takes the call,
    # a masked one went to flash-attn's causal kernel and the causal one to flex)
    calls = []

    def flash_attn_func(q, k, v, softmax_scale, causal):
        calls.append(q.shape)
        return reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), band(q.shape[1], k.shape[1]),
                         softmax_scale).transpose(1, 2)

    monkeypatch.setitem(sys.modules, "flash_attn", types.SimpleNamespace(flash_attn_func=flash_attn_func))
    monkeypatch.setattr(backends, "_flash_takes", lambda q, v: True)
    q, k, v = qkv(T=4, S=4)
    torch.testing.assert_close(backends.flash(q, k, v, None, 0.25), reference(q, k, v, band(4, 4), 0.25))
    assert len(calls) == 1
    mask = band(4, 4)[None, None] & (torch.arange(4) != 1) | (torch.arange(4) == 0)
    torch.testing.assert_close(backends.flash(q, k, v, mask, 0.25), reference(q, k, v, mask, 0.25))
    assert len(calls) == 1   # the masked call went to flex


@pytest.mark.parametrize("block, T, S", [(None, 130, 300), (4, 9, 90)])
def test_block_masks_list_tiles_as_torchs_create_block_mask_does(block, T, S):
    # catches backends.py:96 block=128 -> 127 / 129 (torch's default tile, which flex's kernels take) and :109
    # stable=True -> False (past 16 tiles a row's tile ids came out of order)
    from torch.nn.attention.flex_attention import create_block_mask

    g = torch.Generator().manual_seed(T)
    mask = torch.rand(2, 1, T, S, generator=g) < 0.97
    mask[..., :, 20:40] = True   # full tiles beside partial ones
    m = mask[:, 0]
    ours = backends.block_mask_from_bool(mask, **({} if block is None else {"block": block}))
    theirs = create_block_mask(lambda b, h, qi, ki: m[b, qi, ki], 2, None, T, S, device="cpu",
                               **({} if block is None else {"BLOCK_SIZE": block}))
    assert ours.BLOCK_SIZE == theirs.BLOCK_SIZE
    assert torch.equal(ours.to_dense(), theirs.to_dense())
    for n, ids in ((ours.kv_num_blocks, "kv_indices"), (ours.full_kv_num_blocks, "full_kv_indices")):
        for b in range(2):
            for row in range(n.shape[-1]):
                c = int(n[b, 0, row])
                assert torch.equal(getattr(ours, ids)[b, 0, row, :c], getattr(theirs, ids)[b, 0, row, :c])


# ---- components/fused.py ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("triton", [True, False])
def test_auto_fuses_on_cuda_where_triton_is_installed(monkeypatch, triton):
    # catches fused.py:49 `setting == "auto" and triton` -> `or` (on / off fused where triton is installed),
    # == "auto" -> != "auto", `is not None` -> `is None` (auto fused exactly where triton is missing)
    monkeypatch.setattr(fused.importlib.util, "find_spec", lambda name: object() if triton and name == "triton"
                        else None)
    assert {s: fused.wanted(s, "cuda") for s in ("auto", "compile", "on", "off")} == {
        "auto": triton, "compile": True, "on": False, "off": False}
    assert not fused.wanted("auto", "cpu")


def test_rms_norm_normalises_half_precision_in_float32_and_keeps_float64():
    # catches fused.py:66 `dtype in (float16, bfloat16)` -> `not in`: bfloat16 was normalised in bfloat16 and
    # float64 in float32
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4, 64, generator=g, dtype=torch.float64) * 3
    w = torch.rand(64, generator=g, dtype=torch.float64) + 0.5

    def ref(t):   # RMSNorm, the textbook formula
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)

    torch.testing.assert_close(fused.rms_norm(x, w, 1e-6), w * ref(x), rtol=1e-12, atol=1e-12)
    for dtype in (torch.bfloat16, torch.float16):
        xh, wh = x.to(dtype), w.to(dtype)
        torch.testing.assert_close(fused.rms_norm(xh, wh, 1e-6), wh * ref(xh.float()).to(dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_an_interleaved_rotation_turns_each_adjacent_pair_as_a_complex_number(dtype):
    # catches fused.py:95-96 (every survivor of rotate_interleaved: which halves are paired, the signs, stacking
    # and flattening): pairs (2i, 2i + 1) are x_2i + i x_2i+1 times e^(i angle)
    g = torch.Generator().manual_seed(11)
    B, T, H, d = 2, 3, 4, 8
    x = torch.randn(B, T, H, d, generator=g, dtype=dtype)
    ang = torch.rand(B, T, 1, d // 2, generator=g, dtype=dtype) * 6
    got = fused.rotate_interleaved(x, ang.cos(), ang.sin())
    z = torch.view_as_complex(x.double().reshape(B, T, H, d // 2, 2).contiguous())
    want = torch.view_as_real(z * torch.polar(torch.ones_like(ang.double()), ang.double())).flatten(-2)
    assert got.shape == x.shape and got.dtype == dtype
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_kv_stores_the_rotated_k_beside_v(interleaved):
    # catches fused.py:113 stack((k, v), dim=2) -> dim=1 / dim=3: the cache row is [B, T, 2, Hk, d]
    g = torch.Generator().manual_seed(13)
    B, T, Hq, Hk, d = 2, 3, 4, 2, 8
    q, k, v = (torch.randn(B, T, h, d, generator=g) for h in (Hq, Hk, Hk))
    pos = torch.arange(T).expand(B, T) + 5
    inv_freq = 1.0 / 10000 ** (torch.arange(0, d, 2) / d)
    rq, kv = fused.rope_kv(q, k, v, pos, inv_freq, 1.0, interleaved)
    wq, wk = fused.rope(q, k, pos, inv_freq, 1.0, interleaved)
    assert kv.shape == (B, T, 2, Hk, d)
    torch.testing.assert_close(rq, wq, rtol=0, atol=0)
    torch.testing.assert_close(kv[:, :, 0], wk, rtol=0, atol=0)
    torch.testing.assert_close(kv[:, :, 1], v, rtol=0, atol=0)


# ---- registry/checks.py ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["", "   ", None, 3])
def test_a_spec_source_needs_a_non_empty_name(name):
    # catches checks.py:71 `not isinstance(name, str) or not name.strip()` -> `and` (an empty or blank name passed;
    # None raised AttributeError instead of the contract's message)
    assert record_problem(SpecSource(name, Path("x.yaml")), SpecSource) == (
        "the name must be a non-empty string (draftsmith.load_spec(name) finds the spec by it)")
    assert record_problem(SpecSource("x", Path("x.yaml")), SpecSource) is None
