"""Mutation round 36 (components/stacked_moe.py): the ``moe: stacked`` factory accepts the edges it computes (one
expert a token, every expert a token, a gain below 1) and refuses a limit of 0, a bool, an infinity; a top-1 router
(its one weight exactly 1) still runs the chosen expert; a torch.compile trace or a CUDA graph's capture takes the
every-expert path; the module's repr gives the experts' width."""
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from draftsmith.components import stacked_moe as module
from draftsmith.components.params import StackedMoEParams
from draftsmith.components.stacked_moe import stacked_moe
from draftsmith.components.targets import UnsupportedTarget

HIDDEN, WIDTH = 8, 6
PARAMS = StackedMoEParams(gate_up="interleaved", limit_key="swiglu_limit", alpha_key="swiglu_alpha", alpha=1.702,
                          up_offset=1.0)


def built(experts=4, top_k=2, **more):
    cfg = SimpleNamespace(hidden_size=HIDDEN, num_local_experts=experts, intermediate_size=WIDTH,
                          num_experts_per_tok=top_k, **more)
    moe = stacked_moe(PARAMS, dims=SimpleNamespace(config=cfg, hidden=HIDDEN))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in moe.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    return moe.double()


def reference(moe, x):
    """Token by token: top-k of the router's logits, their softmax, each chosen expert's clamped interleaved SwiGLU."""
    r, e = moe.router, moe.experts
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        top, chosen = F.linear(x[t], r.weight, r.bias).topk(r.top_k)
        for w, i in zip(top.softmax(-1), chosen.tolist()):
            h = x[t] @ e.gate_up_proj[i] + e.gate_up_proj_bias[i]
            gate, up = h[::2], h[1::2]
            if e.limit is not None:
                gate, up = gate.clamp(max=e.limit), up.clamp(-e.limit, e.limit)
            act = (up + e.up_offset) * gate * torch.sigmoid(gate * e.alpha)
            out[t] += w * (act @ e.down_proj[i] + e.down_proj_bias[i])
    return out


@pytest.mark.parametrize("experts, top_k", [(4, 1), (4, 4), (1, 1)])
def test_one_or_every_expert_a_token_is_computed(experts, top_k):
    moe = built(experts, top_k, swiglu_limit=2.0)
    x = torch.randn(2, 5, HIDDEN, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        got = moe(x)
        want = reference(moe, x.reshape(-1, HIDDEN)).view_as(x)
    assert want.abs().max() > 0.1
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


def test_a_gain_below_one_is_the_config_s():
    assert built(swiglu_alpha=0.5).experts.alpha == 0.5


@pytest.mark.parametrize("limit", [0, 0.0, True, math.inf, -math.inf, math.nan, "7"])
def test_a_limit_not_positive_and_finite_is_refused(limit):
    with pytest.raises(UnsupportedTarget, match=f"swiglu_limit={limit!r} in its mixture-of-experts layers.*allowed"):
        built(swiglu_limit=limit)


@pytest.mark.parametrize("alpha", [True, math.inf, "1.7"])
def test_an_alpha_not_a_finite_number_is_refused(alpha):
    with pytest.raises(UnsupportedTarget, match="swiglu_alpha=.* in its mixture-of-experts layers.*allowed"):
        built(swiglu_alpha=alpha)


def test_a_trace_and_a_capture_take_the_every_expert_path(monkeypatch):
    moe = built(swiglu_limit=2.0)
    x = torch.randn(3, HIDDEN, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        want = reference(moe, x)
        torch._dynamo.reset()
        try:   # fullgraph: the chosen experts' nonzero / tolist would break the graph, and fail
            got = torch.compile(moe, fullgraph=True, backend="eager")(x)
        finally:
            torch._dynamo.reset()
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        monkeypatch.setattr(module, "capturing", lambda _: True)
        monkeypatch.setattr(moe.experts, "chosen_experts", None)   # no row may be looked up while capturing
        torch.testing.assert_close(moe(x), want, atol=1e-12, rtol=0)


def test_the_repr_gives_the_experts_width():
    text = repr(built(swiglu_limit=2.0).experts)
    assert f"experts=4, hidden={HIDDEN}, width={WIDTH}, gate_up=interleaved, limit=2.0" in text
