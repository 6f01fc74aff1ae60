"""Mutation survivors of the block components (layers, mlp, norms, gqa, mtp, dims, targets): the defaults a plugin
or a hand-built module gets when it leaves an argument out (EAGLE-3's residual before hidden_norm, a SwiGLU
without biases, eager kernels, MTP's embed-first order with position 0 zeroed), the residual add of a norm without
a fused ``add_forward``, the fused two-norm kernel, a norm's repr, and frozen params; transformers is the oracle
where it has the piece (LlamaMLP, LlamaRMSNorm, MtpLayer)."""
import dataclasses
from types import SimpleNamespace

import pydantic
import pytest
import torch
from torch import nn
from transformers import LlamaConfig
from transformers.modeling_layers import MtpLayer
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

from draftsmith.components import fused
from draftsmith.components.dims import Dims
from draftsmith.components.gqa import GQAParams
from draftsmith.components.layers import DecoderLayer, embed_concat, llama_layer
from draftsmith.components.mlp import MLPParams, SwiGLU, swiglu
from draftsmith.components.mtp import MTPFusion, MTPParams, mtp
from draftsmith.components.norms import RMSNorm, add_then_norm, norm_cat
from draftsmith.components.targets import TARGETS, TargetArch, mtp_layer_patterns

H = 8


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def no_compile(monkeypatch):
    """fused._compiled recorded and replaced by the eager function (nothing is compiled)."""
    calls = []
    monkeypatch.setattr(fused, "_compiled", lambda fn: calls.append(fn.__name__) or fn)
    return calls


def _zero_attn(x, pos, kv):
    return torch.zeros(*x.shape[:-1], H)


@pytest.mark.parametrize("build", ["DecoderLayer", "llama_layer"])
def test_an_eagle3_first_layer_takes_its_residual_before_hidden_norm_by_default(build):
    # catches layers.py:48 DecoderLayer(norm_before_residual=False -> True) and :75 llama_layer's same default
    # (speculators' and the EAGLE-3 reference's default: the residual is x, not hidden_norm(x))
    mlp = nn.Linear(H, H)
    if build == "DecoderLayer":
        layer = DecoderLayer(_zero_attn, mlp, input_layernorm=RMSNorm(H), post_attention_layernorm=RMSNorm(H),
                             hidden_norm=RMSNorm(H), mix=embed_concat)
    else:
        layer = llama_layer(None, attn=_zero_attn, mlp=mlp, norm=RMSNorm, dims=SimpleNamespace(hidden=H),
                            input_norm=True, hidden_norm=True, mix=embed_concat)
    x, emb = _randn(2, 3, H, seed=1), _randn(2, 3, H, seed=2)
    with torch.no_grad():
        h, delta = layer.split_forward(x, None, emb=emb)   # attention adds zero: h is the residual itself
    assert torch.equal(h, x)
    assert not torch.equal(layer.hidden_norm(x), x)


def test_a_swiglu_has_no_biases_by_default_and_equals_llama_mlp():
    # catches mlp.py:19 SwiGLU(bias=False -> True): LlamaMLP's weights load strictly and give its output
    cfg = LlamaConfig(hidden_size=H, num_attention_heads=2, intermediate_size=12, hidden_act="silu", mlp_bias=False)
    torch.manual_seed(0)
    ref = LlamaMLP(cfg)
    ours = SwiGLU(H, 12)
    ours.load_state_dict(ref.state_dict(), strict=True)
    x = _randn(2, 3, H)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=0)
    built = swiglu(MLPParams(), dims=SimpleNamespace(hidden=H, intermediate=12))
    assert set(built.state_dict()) == set(ref.state_dict())


def test_fresh_modules_run_eager_kernels(no_compile):
    # catches mlp.py:24 self.fused = False -> True (a fresh SwiGLU would compile its gate on a CPU run)
    SwiGLU(H, 12)(_randn(1, 2, H))
    RMSNorm(H)(_randn(1, 2, H))
    assert no_compile == []


def test_two_fused_rms_norms_side_by_side_run_as_one_compiled_kernel(no_compile):
    # catches norms.py:51 kernel(rms_norm_cat, True) -> False (the fused pair ran two eager norms and a cat)
    a_norm, b_norm = RMSNorm(H, 1e-5), RMSNorm(H, 1e-6)
    a_norm.weight.data, b_norm.weight.data = _randn(H, seed=3), _randn(H, seed=4)
    a, b = _randn(2, 3, H, seed=1), _randn(2, 3, H, seed=2)
    with torch.no_grad():
        want_cat, want_b = norm_cat(a_norm, a, b_norm, b)
        a_norm.fused = b_norm.fused = True
        got_cat, got_b = norm_cat(a_norm, a, b_norm, b)
    assert no_compile == ["rms_norm_cat"]
    torch.testing.assert_close(got_cat, want_cat), torch.testing.assert_close(got_b, want_b)


@pytest.mark.parametrize("slot", ["identity", "llama_rms_norm"])
def test_a_norm_without_add_forward_adds_the_residual_first(slot):
    # catches norms.py:42 h = x + delta -> x - delta (an identity slot or a plugin norm with no fused add)
    x, delta = _randn(2, 3, H, seed=1), _randn(2, 3, H, seed=2)
    ours = RMSNorm(H, 1e-5)
    ours.weight.data = _randn(H, seed=3)
    norm = nn.Identity() if slot == "identity" else LlamaRMSNorm(H, eps=1e-5)
    if slot != "identity":
        norm.weight.data = ours.weight.data.clone()
    with torch.no_grad():
        h, normed = add_then_norm(norm, x, delta)
        want_h, want_normed = add_then_norm(ours, x, delta)   # RMSNorm.add_forward: x + delta, then the norm
    torch.testing.assert_close(h, want_h, rtol=0, atol=0)
    torch.testing.assert_close(normed, want_h if slot == "identity" else want_normed)


def test_an_rms_norm_prints_its_width_and_eps():
    # catches norms.py:25 weight.shape[0] -> shape[1] (printing a model raised IndexError)
    assert repr(RMSNorm(H, 1e-5)) == "RMSNorm(8, eps=1e-05)"


class _Through(nn.Module):
    """MtpLayer's decoder block slot left empty, so that the reference returns eh_proj's output."""

    def __init__(self, config, layer_idx):
        super().__init__()

    def forward(self, hidden_states, **_):
        return hidden_states


@pytest.mark.parametrize("build", ["MTPFusion", "mtp"])
def test_mtp_fusion_defaults_put_the_embedding_first_and_zero_it_at_position_0(build):
    # catches mtp.py:41 MTPFusion(zero_first_embedding=True -> False), (hidden_first=False -> True) and :25
    # MTPParams.zero_first_embedding True -> False: DeepSeek's eh_proj(cat([enorm(e), hnorm(h)])) (transformers'
    # MtpLayer, whose default is embed first), with the token embedding at position 0 zeroed as vLLM and SGLang do
    cfg = LlamaConfig(hidden_size=H, num_attention_heads=2, rms_norm_eps=1e-5)
    torch.manual_seed(0)
    ref = MtpLayer(cfg, _Through, LlamaRMSNorm, layer_idx=0, use_post_norm=False).eval()
    ref.enorm.weight.data, ref.hnorm.weight.data = _randn(H, seed=3), _randn(H, seed=4)
    if build == "MTPFusion":
        fc = MTPFusion(H, H, lambda dim: RMSNorm(dim, 1e-5))
    else:
        fc = mtp(MTPParams(), hidden=H, target_width=H, draft_config={"rms_norm_eps": 1e-5})
    fc.load_state_dict(ref.state_dict(), strict=True)
    emb, hidden = _randn(2, 3, H, seed=1), _randn(2, 3, H, seed=2)
    pos = torch.tensor([[0, 1, 2], [3, 4, 5]])
    with torch.no_grad():
        got = fc.fuse(emb, hidden, True, pos)
        want = ref(emb.masked_fill((pos == 0)[..., None], 0.0), hidden, None, None, pos, None)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("params", [MLPParams(), GQAParams(), MTPParams(), TargetArch()],
                         ids=lambda p: type(p).__name__)
def test_component_params_are_frozen(params):
    # catches mlp.py:14, gqa.py:16, mtp.py:23, targets.py:30 ConfigDict(frozen=True -> False)
    name = next(iter(type(params).model_fields))
    with pytest.raises(pydantic.ValidationError):
        setattr(params, name, getattr(params, name))
    assert hash(params) == hash(type(params)())


def test_dims_are_frozen():
    # catches dims.py:11 @dataclass(frozen=True) -> frozen=False
    dims = Dims.from_config(LlamaConfig(hidden_size=H, num_attention_heads=2, intermediate_size=12))
    with pytest.raises(dataclasses.FrozenInstanceError):
        dims.hidden = 16


@pytest.mark.parametrize("hc_mult", [None, 0, 1])
def test_a_config_stating_no_hyper_connections_loads(hc_mult):
    # catches targets.py:54 `hc_mult or 1` -> `or 2` (a config with hc_mult: null was refused as 2 streams)
    cfg = SimpleNamespace(model_type="llama", hc_mult=hc_mult, num_hidden_layers=2)
    TARGETS["llama"]().check(cfg)


@pytest.mark.parametrize("raw, want", [
    ({"num_hidden_layers": 4}, []),                                   # no MTP layers declared
    ({"num_hidden_layers": 4, "num_nextn_predict_layers": 0}, []),
    ({"num_nextn_predict_layers": 1}, []),                            # no layer count to place them after
    ({"num_nextn_predict_layers": 1, "num_hidden_layers": None}, []),
    ({"num_mtp_layers": 2, "num_hidden_layers": 4}, [r"^model\.layers\.4\.", r"^model\.layers\.5\."]),
])
def test_mtp_layer_patterns_only_for_declared_layers_after_a_known_count(raw, want):
    # catches targets.py:98 `or 0` -> `or 1` (layer L ignored in every config) and :100 `not n or not
    # isinstance(L, int)` -> `and` (a declared MTP layer without num_hidden_layers raised TypeError)
    assert mtp_layer_patterns(raw) == want
