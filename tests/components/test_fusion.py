"""fusion.py's components built by their factories, against hand-written fc products and transformers' RMSNorm.

The assembler tests (tests/assembler/test_drafts.py) load whole drafts; here each fusion is checked on its own:
the widths, which norm runs on which slice, what passes through, and the factory's reading of the draft config.
"""
import logging

import pytest
import torch
from pydantic import ValidationError
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from draftsmith.components.fusion import Eagle1Fusion, Eagle1Params, Eagle3Fusion, Eagle3Params, eagle1, eagle3
from draftsmith.components.layers import embed_concat, own_input
from draftsmith.components.params import AuxLayers
from draftsmith.errors import SpecError

H, HT, L = 8, 6, 12  # draft hidden, target hidden, target layers


def _randomize(module: torch.nn.Module, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():   # norm weights around 1, fc weights and biases around 0
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if "norm" in name else 0.0))


def _hf_norm(weight: torch.Tensor, eps: float, x: torch.Tensor) -> torch.Tensor:
    ref = LlamaRMSNorm(weight.shape[0], eps=eps)
    with torch.no_grad():
        ref.weight.copy_(weight)
        return ref(x)


def _e3(draft_config: dict | None = None, **params) -> Eagle3Fusion:
    fc = eagle3(Eagle3Params(norm_before_residual=False, **params), hidden=H, target_width=HT,
                draft_config={"eagle_aux_hidden_state_layer_ids": [1, 5, 9], **(draft_config or {})},
                target_layers=L)
    _randomize(fc)
    return fc


# --- EAGLE-1 ------------------------------------------------------------------------------------------------------

def test_eagle1_is_one_linear_over_embedding_then_hidden():
    fc = eagle1(Eagle1Params(), hidden=H, target_width=H, draft_config={})
    _randomize(fc)
    emb, hid = torch.randn(2, 3, H), torch.randn(2, 3, H)
    want = emb @ fc.weight[:, :H].T + hid @ fc.weight[:, H:].T + fc.bias   # embedding first, hidden second
    for from_target in (True, False):                                        # the draft's own states go through fc too
        torch.testing.assert_close(fc.fuse(emb, hid, from_target), want)
    assert fc.weight.shape == (H, 2 * H)
    assert (fc.taps, fc.first_in_factor, fc.has_hidden_norm, fc.norm_before_residual, fc.norm_output) == \
        (None, 1, False, False, "head")
    assert fc.first_mix is own_input


@pytest.mark.parametrize(("params", "config", "bias"), [
    ({}, {}, True),                               # a MISSING key means a bias (EAGLE-1's reference default)
    ({}, {"bias": False}, False),
    ({}, {"bias": True}, True),
    ({"bias": False}, {"bias": True}, False),     # the spec wins
    ({"bias": True}, {"bias": False}, True),
])
def test_eagle1_bias_comes_from_the_spec_else_the_draft_config_else_true(params, config, bias):
    fc = eagle1(Eagle1Params(**params), hidden=H, target_width=H, draft_config=config)
    assert (fc.bias is not None) is bias


def test_eagle1_refuses_a_draft_narrower_than_its_target():
    with pytest.raises(SpecError, match=r"eagle1 needs the draft's hidden size \(8\) to equal the target's \(6\)"):
        eagle1(Eagle1Params(), hidden=H, target_width=HT, draft_config={})


# --- EAGLE-3 ------------------------------------------------------------------------------------------------------

def test_eagle3_fc_maps_the_concatenated_taps_and_passes_the_drafts_own_states_through():
    fc = _e3()
    assert fc.taps == (1, 5, 9) and fc.weight.shape == (H, 3 * HT) and fc.bias is None
    assert (fc.first_in_factor, fc.has_hidden_norm, fc.norm_output) == (2, True, "head")
    assert fc.first_mix is embed_concat
    assert not hasattr(fc, "aux_norm") and not hasattr(fc, "input_norm")
    emb, aux, own = torch.randn(2, 3, H), torch.randn(2, 3, 3 * HT), torch.randn(2, 3, H)
    torch.testing.assert_close(fc.fuse(emb, aux, True), aux @ fc.weight.T)
    assert fc.fuse(emb, own, False) is own


def test_eagle3_fc_norm_normalises_each_aux_state_with_its_own_weight():
    fc = _e3({"rms_norm_eps": 1e-2}, fc_norm=True)
    assert len(fc.aux_norm) == 3 and not hasattr(fc, "input_norm")
    aux = torch.randn(2, 3, 3 * HT)
    normed = torch.cat([_hf_norm(n.weight, 1e-2, c) for n, c in zip(fc.aux_norm, aux.split(HT, -1))], -1)
    torch.testing.assert_close(fc.fuse(None, aux, True), normed @ fc.weight.T)


def test_eagle3_norm_before_fc_normalises_the_concatenation_once():
    fc = _e3({"rms_norm_eps": 1e-2}, norm_before_fc=True)
    assert fc.input_norm.weight.shape == (3 * HT,) and not hasattr(fc, "aux_norm")
    aux = torch.randn(2, 3, 3 * HT)
    torch.testing.assert_close(fc.fuse(None, aux, True), _hf_norm(fc.input_norm.weight, 1e-2, aux) @ fc.weight.T)


@pytest.mark.parametrize(("config", "eps"),
                         [({}, 1e-6), ({"rms_norm_eps": None}, 1e-6), ({"rms_norm_eps": 1e-3}, 1e-3)])
def test_eagle3_norms_take_the_draft_configs_eps_else_1e_6(config, eps):
    assert _e3(config, fc_norm=True).aux_norm[0].eps == eps


def test_eagle3_uses_an_injected_norm_factory():
    fc = eagle3(Eagle3Params(norm_before_residual=True, norm_before_fc=True), hidden=H, target_width=HT,
                draft_config={"eagle_aux_hidden_state_layer_ids": [1, 5, 9]}, target_layers=L,
                norm=lambda d: torch.nn.LayerNorm(d))
    assert type(fc.input_norm) is torch.nn.LayerNorm and fc.input_norm.normalized_shape == (3 * HT,)
    assert fc.norm_before_residual is True


def test_eagle3_reports_the_defaults_it_took_once_on_one_line(caplog):
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        _e3({})
    lines = [r.getMessage() for r in caplog.records if r.name == "draftsmith"]
    assert len(lines) == 1 and lines[0].startswith("EAGLE-3 draft: ") and "norm_output" in lines[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        _e3({"fc_norm": False, "norm_before_fc": False}, norm_output="head")   # every fact stated: silence
    assert [r for r in caplog.records if r.name == "draftsmith"] == []


# --- params ---------------------------------------------------------------------------------------------------------

def test_auto_flags_are_kept_as_none_and_written_back_as_auto():
    p = Eagle3Params(norm_before_residual="auto", fc_norm="auto", norm_output="auto")
    assert (p.norm_before_residual, p.fc_norm, p.norm_output) == (None, None, None)
    dumped = p.model_dump()
    assert dumped["norm_before_residual"] == dumped["fc_norm"] == dumped["norm_output"] == "auto"
    assert Eagle3Params(norm_before_residual=True).model_dump()["norm_before_residual"] is True


def test_aux_layer_ids_must_be_distinct_and_the_repeats_are_named():
    assert AuxLayers(ids=(2, 6, 9)).ids == (2, 6, 9) and AuxLayers().ids is None
    with pytest.raises(ValidationError, match=r"\[2, 6, 2, 6, 9\] names layer\(s\) \[2, 6\] more than once"):
        AuxLayers(ids=(2, 6, 2, 6, 9))


def test_eagle1_fusion_class_keeps_its_input_width():
    assert Eagle1Fusion(H, HT, bias=False).in_features == H + HT


@pytest.mark.parametrize("make", [lambda: Eagle1Params(), lambda: AuxLayers(ids=(1, 2)),
                                  lambda: Eagle3Params(norm_before_residual=False)], ids=["eagle1", "aux", "eagle3"])
def test_params_are_frozen(make):
    p = make()
    name = next(iter(type(p).model_fields))
    with pytest.raises(ValidationError, match="frozen"):
        setattr(p, name, getattr(p, name))


def test_num_aux_counts_at_least_one_state():
    assert Eagle3Params(norm_before_residual=False, num_aux=1).num_aux == 1
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        Eagle3Params(norm_before_residual=False, num_aux=0)
