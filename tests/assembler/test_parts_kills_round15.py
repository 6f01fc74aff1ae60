"""Stacker (draftsmith.assembler.parts) on the default registry: each part of a recipe is built with its own
validated params, the norm with the dims' eps, and a layer's slots follow its keywords, whose defaults are the
target's (an input norm, no hidden norm, own input, the residual before the norm)."""
import torch
from torch import nn
from transformers import LlamaConfig

import draftsmith
from draftsmith.assembler.parts import LayerRecipe, Stacker
from draftsmith.components import backends
from draftsmith.components.dims import Dims
from draftsmith.components.layers import embed_concat, own_input
from draftsmith.components.norms import RMSNorm


def _stacker(**recipe):
    cfg = LlamaConfig(hidden_size=16, intermediate_size=24, num_attention_heads=2, num_key_value_heads=1,
                      num_hidden_layers=2, vocab_size=32, rms_norm_eps=1e-3)
    return Stacker(draftsmith.default_registry(), LayerRecipe(**recipe), Dims.from_config(cfg), backends.sdpa)


# catches parts.py:36 resolve(registry, kind, name, params)[1] -> [0] (the component handed over as its params)
def test_each_part_is_built_with_the_params_the_recipe_names():
    stack = _stacker(mlp=("swiglu", {"bias": True}))
    layer = stack.layer(0, in_width=16)
    assert [m.bias is not None for m in (layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj)] == [True] * 3
    assert layer.mlp.gate_proj.weight.shape == (24, 16) and layer.mlp.down_proj.weight.shape == (16, 24)
    plain = _stacker().layer(0, in_width=16)
    assert plain.mlp.gate_proj.bias is None


def test_a_norm_is_built_at_the_width_asked_with_the_dims_eps():
    norm = _stacker().norm(12)
    assert isinstance(norm, RMSNorm) and norm.weight.shape == (12,) and norm.eps == 1e-3


# catches parts.py:41 Stacker.layer(input_norm=True) -> False, (hidden_norm=False) -> True
# catches parts.py:42 Stacker.layer(norm_before_residual=False) -> True
def test_a_layer_by_default_has_an_input_norm_and_no_hidden_norm_and_mixes_its_own_input():
    layer = _stacker().layer(1, in_width=16)
    assert isinstance(layer.input_layernorm, RMSNorm) and layer.input_layernorm.eps == 1e-3
    assert isinstance(layer.hidden_norm, nn.Identity) and isinstance(layer.post_attention_layernorm, RMSNorm)
    assert layer.mix is own_input and layer.norm_before_residual is False
    assert layer.self_attn.layer_idx == 1


def test_a_layers_keywords_fill_its_slots():
    first = _stacker().layer(0, in_width=32, input_norm=False, hidden_norm=True, mix=embed_concat,
                             norm_before_residual=True)
    assert isinstance(first.input_layernorm, nn.Identity) and isinstance(first.hidden_norm, RMSNorm)
    assert first.hidden_norm.weight.shape == (16,)
    assert first.mix is embed_concat and first.norm_before_residual is True
    x = torch.randn(1, 3, 16)
    emb = torch.randn(1, 3, 16)
    pos = torch.arange(3).view(1, 3)
    assert first(x, pos, None, emb).shape == (1, 3, 16)      # attention takes [emb; x] at width 32
