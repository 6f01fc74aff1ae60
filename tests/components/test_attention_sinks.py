"""Attention sinks (``attention: gqa`` with ``sinks: true``): every built-in backend computes transformers' gpt-oss
eager attention (a learned logit per head joining each query's softmax, then dropped), causal or masked, through the
sliding-window wrapper too; a plugin backend that does not say it takes sinks is refused, not run without them. The
``moe: stacked`` factory's alpha falls back to its param where the config has no key."""
from types import SimpleNamespace

import pytest
import torch
from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

from draftsmith.components import backends
from draftsmith.components.backends import causal_mask
from draftsmith.components.dims import Dims
from draftsmith.components.gqa import gqa
from draftsmith.components.params import GQAParams, StackedMoEParams
from draftsmith.components.sliding import window_mask, windowed
from draftsmith.components.stacked_moe import stacked_moe
from draftsmith.errors import OptionError

B, H, KV, D = 2, 4, 2, 8
SINKS = torch.tensor([2.0, -1.5, 0.3, 4.0], dtype=torch.float64)


def qkv(T, S, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, n, t, D, generator=g, dtype=dtype) for n, t in ((H, T), (KV, S), (KV, S))]


def theirs(q, k, v, allowed):
    """transformers' gpt-oss eager attention, its additive mask made of ``allowed`` [.., T, S] bool."""
    module = SimpleNamespace(num_key_value_groups=H // KV, sinks=SINKS.to(q.dtype), training=False)
    additive = torch.zeros(allowed.shape, dtype=q.dtype).masked_fill(~allowed, torch.finfo(q.dtype).min)
    return eager_attention_forward(module, q, k, v, additive, scaling=D**-0.5)[0].transpose(1, 2)


def tree_mask(T, S, seed=1):
    """[B, 1, T, S]: a random prefix-and-tree-like mask, every query seeing itself (its key at S - T + t)."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(B, 1, T, S, generator=g) < 0.5
    return mask | causal_mask(T, S).logical_and(~causal_mask(T, S).tril(S - T - 1))


BACKENDS = ["eager", "sdpa", "flex", "flash", "auto"]


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("T, S, masked", [(7, 7, False), (3, 9, False), (1, 6, False), (4, 10, True), (1, 5, True)])
def test_every_backend_computes_transformers_sinks(name, T, S, masked):
    backend = getattr(backends, name)
    assert backends.sinks_taken(backend)
    dtype = torch.float32 if name in ("flex", "flash") else torch.float64
    q, k, v = qkv(T, S, dtype)
    mask = tree_mask(T, S) if masked else None
    got = backend(q, k, v, mask, D**-0.5, sinks=SINKS.to(dtype))
    want = theirs(q, k, v, causal_mask(T, S) if mask is None else mask)
    torch.testing.assert_close(got, want, atol=1e-5 if dtype == torch.float32 else 1e-12, rtol=0)
    plain = backend(q, k, v, mask, D**-0.5)
    assert (plain - got).abs().max() > 1e-2   # the sinks matter here


def test_a_low_precision_single_query_on_the_cpu_keeps_its_sinks():
    q, k, v = qkv(1, 6, torch.bfloat16)
    got = backends.sdpa(q, k, v, None, D**-0.5, sinks=SINKS.to(torch.bfloat16))
    want = theirs(q.double(), k.double(), v.double(), causal_mask(1, 6))
    torch.testing.assert_close(got.double(), want, atol=2e-2, rtol=0)


@pytest.mark.parametrize("S", [3, 12])   # within the window (the wrapper's mask-free path) and past it
def test_the_window_wrapper_passes_the_sinks_on(S):
    attend = windowed(backends.sdpa, 4)
    assert backends.sinks_taken(attend)
    q, k, v = qkv(S, S)
    want = theirs(q, k, v, window_mask(causal_mask(S, S), 4))
    torch.testing.assert_close(attend(q, k, v, None, D**-0.5, sinks=SINKS), want, atol=1e-12, rtol=0)


def _dims():
    cfg = SimpleNamespace(hidden_size=32, num_attention_heads=H, num_key_value_heads=KV, head_dim=D,
                          intermediate_size=16, num_hidden_layers=1, vocab_size=50, rms_norm_eps=1e-5,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    return Dims.from_config(cfg)


def test_a_backend_without_sinks_is_refused_for_a_layer_with_sinks():
    def plugin(q, k, v, mask, scale):
        return backends.sdpa(q, k, v, mask, scale)

    with pytest.raises(OptionError, match=r"'plugin' \(decoding\.attention\) does not compute attention sinks.*Fix"):
        gqa(GQAParams(sinks=True), dims=_dims(), layer_idx=0, in_width=32, backend=plugin, norm=None)
    assert gqa(GQAParams(), dims=_dims(), layer_idx=0, in_width=32, backend=plugin, norm=None).sinks is None
    made = gqa(GQAParams(sinks=True), dims=_dims(), layer_idx=0, in_width=32, backend=backends.takes_sinks(plugin),
               norm=None)
    assert made.sinks.shape == (H,)


def test_the_experts_alpha_is_the_config_s_else_the_param_s():
    cfg = SimpleNamespace(hidden_size=32, num_local_experts=4, intermediate_size=16, num_experts_per_tok=2,
                          swiglu_limit=7.0)
    params = StackedMoEParams(alpha_key="swiglu_alpha", alpha=1.702, limit_key="swiglu_limit")
    dims = SimpleNamespace(config=cfg, hidden=32)
    assert stacked_moe(params, dims=dims).experts.alpha == 1.702
    cfg.swiglu_alpha = 2.5
    moe = stacked_moe(params, dims=dims)
    assert (moe.experts.alpha, moe.experts.limit) == (2.5, 7.0)


def test_flash_attn_never_gets_a_call_with_sinks(monkeypatch):
    """On CUDA with flash-attn installed, auto sends causal calls to flash and flash to flash_attn_func, which takes
    no sinks: with sinks, auto takes sdpa and flash takes flex (here pretended on the CPU)."""
    q, k, v = qkv(5, 5, torch.float32)
    want = theirs(q, k, v, causal_mask(5, 5))
    monkeypatch.setattr(backends, "has_flash_attn", lambda: True)
    monkeypatch.setattr(backends, "_flash_takes", lambda *_: True)
    called = []
    monkeypatch.setattr(backends, "flash", lambda *a, **kw: called.append(a) or want)
    torch.testing.assert_close(backends.auto(q, k, v, None, D**-0.5, sinks=SINKS.float()), want, atol=1e-5, rtol=0)
    assert not called
    monkeypatch.undo()
    monkeypatch.setattr(backends, "_flash_takes", lambda *_: True)   # flash-attn is not installed: never imported
    torch.testing.assert_close(backends.flash(q, k, v, None, D**-0.5, sinks=SINKS.float()), want, atol=1e-5, rtol=0)
