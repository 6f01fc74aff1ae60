"""Attention backends' routing and layouts, at their edges (mutation run 2026-11-25): auto sends only causal calls
flash-attn takes to it, flash falls back to flex for what flash-attn cannot run, flash-attn's [B, T, H, d] layout
round-trips, head sizes up to 256 only, GQA is read from the head counts (not the batch), and flash-attn's
presence is what importlib finds."""
import sys
import types

import pytest
import torch

from draftsmith.components import backends


def qkv(B=1, H=4, Hkv=2, T=5, S=5, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, 16, generator=g, dtype=torch.float64).to(dtype)
    k, v = (torch.randn(B, Hkv, S, 16, generator=g, dtype=torch.float64).to(dtype) for _ in range(2))
    return q, k, v


def test_gqa_is_read_from_the_head_counts_not_the_batch():
    """A batch of 4 over 4 query heads and 2 kv heads: SDPA is told GQA (the batch size equals the query heads)."""
    q, k, v = qkv(B=4, H=4, Hkv=2, T=3, S=7)
    mask = torch.rand(4, 1, 3, 7, generator=torch.Generator().manual_seed(1)) > 0.4
    mask[..., 0] = True
    torch.testing.assert_close(backends.sdpa(q, k, v, mask, 0.25), backends.eager(q, k, v, mask, 0.25))


@pytest.mark.parametrize("size, takes", [(256, True), (257, False)])
def test_flash_attn_takes_head_sizes_up_to_256(size, takes):
    assert backends.flash_computes(torch.bfloat16, size, size) is takes


@pytest.mark.parametrize("found, has", [(None, False), (object(), True)])
def test_flash_attn_is_present_when_importlib_finds_it(monkeypatch, found, has):
    monkeypatch.setattr(backends.importlib.util, "find_spec", lambda name: found if name == "flash_attn" else None)
    backends.has_flash_attn.cache_clear()   # asked once per process: the answer is cached
    try:
        assert backends.has_flash_attn() is has
    finally:
        backends.has_flash_attn.cache_clear()


def test_flash_attn_presence_is_searched_once(monkeypatch):
    """auto asks for flash-attn on every causal CUDA call: importlib's search (~75 us) runs once per process."""
    calls = []
    monkeypatch.setattr(backends.importlib.util, "find_spec", lambda name: calls.append(name))
    backends.has_flash_attn.cache_clear()
    try:
        for _ in range(3):
            backends.has_flash_attn()
    finally:
        backends.has_flash_attn.cache_clear()
    assert calls == ["flash_attn"]


def routed(monkeypatch, *, takes=None, installed=True):
    """Record which backend auto hands each call to (flash-attn installed or not, taking the call or not)."""
    seen = []
    monkeypatch.setattr(backends, "has_flash_attn", lambda: installed)
    if takes is not None:
        monkeypatch.setattr(backends, "_flash_takes", lambda q, v: takes)
    monkeypatch.setattr(backends, "flash", lambda *a: seen.append("flash") or backends.eager(*a))
    monkeypatch.setattr(backends, "sdpa", lambda *a: seen.append("sdpa") or backends.eager(*a))
    return seen


@pytest.mark.parametrize("masked, takes, installed, want", [(False, True, True, "flash"), (True, True, True, "sdpa"),
                                                            (False, False, True, "sdpa"), (False, True, False, "sdpa")])
def test_auto_sends_only_causal_calls_flash_attn_takes_to_it(monkeypatch, masked, takes, installed, want):
    seen = routed(monkeypatch, takes=takes, installed=installed)
    q, k, v = qkv()
    backends.auto(q, k, v, backends.causal_mask(5, 5)[None, None] if masked else None, 0.25)
    assert seen == [want]


def test_auto_keeps_a_cpu_call_from_flash_attn_even_when_installed(monkeypatch):
    """flash-attn runs on CUDA only: a causal bf16 call with head size 16 on CPU goes to SDPA."""
    seen = routed(monkeypatch)
    q, k, v = qkv(dtype=torch.bfloat16)
    backends.auto(q, k, v, None, 0.25)
    assert seen == ["sdpa"]


def test_flash_falls_back_to_flex_for_what_flash_attn_cannot_run(monkeypatch):
    """On CPU (or masked), the flash backend is flex: no flash_attn import (it is absent here)."""
    monkeypatch.setitem(sys.modules, "flash_attn", None)   # importing it raises
    q, k, v = qkv(T=3, S=6)
    mask = backends.causal_mask(3, 6)[None, None].clone()
    for m in (None, mask):
        torch.testing.assert_close(backends.flash(q, k, v, m, 0.25), backends.eager(q, k, v, m, 0.25))


def test_flash_hands_flash_attn_its_own_layout_and_takes_it_back(monkeypatch):
    """flash_attn_func takes and returns [B, T, H, d] (a stand-in here computes it with eager): the result is the
    causal attention in draftsmith's [B, H, T, d]."""
    def flash_attn_func(q, k, v, softmax_scale, causal):
        assert causal and q.shape[1] == 5 and k.shape[2] == 2   # T and the kv heads where flash-attn reads them
        return backends.eager(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None,
                              softmax_scale).transpose(1, 2)

    monkeypatch.setitem(sys.modules, "flash_attn", types.SimpleNamespace(flash_attn_func=flash_attn_func))
    monkeypatch.setattr(backends, "_flash_takes", lambda q, v: True)
    q, k, v = qkv(B=2, H=4, Hkv=2, T=5, S=5)
    torch.testing.assert_close(backends.flash(q, k, v, None, 0.25), backends.eager(q, k, v, None, 0.25))
