"""Round 25c (layers, gqa, mlp, norms): a ``layer: llama`` block assembled from the ``attention: gqa``,
``mlp: swiglu`` and ``norm: rms`` factories, loaded strictly with the weights of transformers' own decoder layer,
computes that layer (transformers is the oracle): grouped-query attention with 4 query heads over 2 KV heads, the
rope at offset positions, the config's biases (Llama's attention_bias on q/k/v/o, Qwen2's q/k/v only) and Qwen3's
per-head q/k norms with a head_dim that is not hidden / heads. scripts/mutate.py left no survivor in layers.py,
mlp.py or norms.py; this pins the block as a whole against the reference, rather than piece by piece (it fails on
hand mutants such as k_norm dropped, the MLP reading the residual instead of the post-attention norm, or the
post-attention norm left out)."""
import pytest
import torch
from transformers import LlamaConfig, Qwen2Config, Qwen3Config
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding
from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer
from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

from draftsmith.components import backends
from draftsmith.components.dims import Dims
from draftsmith.components.gqa import GQAParams, gqa
from draftsmith.components.layers import llama_layer
from draftsmith.components.mlp import MLPParams, swiglu
from draftsmith.components.norms import rms

SIZES = dict(hidden_size=16, num_attention_heads=4, num_key_value_heads=2, intermediate_size=24, num_hidden_layers=2,
             vocab_size=32, rms_norm_eps=1e-5, rope_theta=500.0)
CASES = {
    "llama-attention_bias": (lambda: LlamaConfig(**SIZES, attention_bias=True), LlamaDecoderLayer, {}),
    "llama": (lambda: LlamaConfig(**SIZES), LlamaDecoderLayer, {}),
    "qwen2": (lambda: Qwen2Config(**SIZES), Qwen2DecoderLayer, {"qkv_bias": True}),
    "qwen3": (lambda: Qwen3Config(**SIZES, head_dim=6), Qwen3DecoderLayer, {"qk_norm": True}),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("backend", ["sdpa", "eager"])
def test_a_llama_layer_of_gqa_swiglu_rms_computes_transformers_decoder_layer(case, backend):
    """Same weights (a strict load of the reference's state dict: the same names and shapes, biases included),
    float64, causal, positions 3..9: the output equals transformers' decoder layer up to the float32 the norms and
    rope frequencies compute in. A wrong KV-head grouping, rope, bias or norm slot is off by O(1)."""
    make_cfg, Ref, gqa_params = CASES[case]
    cfg = make_cfg()
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    ref = Ref(cfg, layer_idx=0).double().eval()
    for p in ref.parameters():          # not the init's ones/zeros: every norm weight and bias matters
        torch.nn.init.normal_(p, std=0.3)
    dims = Dims.from_config(cfg)
    assert (dims.heads, dims.kv_heads) == (4, 2)

    def norm(d):
        return rms(None, dim=d, eps=dims.eps)

    attn = gqa(GQAParams(**gqa_params), dims=dims, layer_idx=0, in_width=dims.hidden,
               backend=getattr(backends, backend), norm=norm)
    mine = llama_layer(None, attn=attn, mlp=swiglu(MLPParams(), dims=dims), norm=norm, dims=dims, input_norm=True,
                       hidden_norm=False).double().eval()
    mine.load_state_dict(ref.state_dict(), strict=True)
    B, n = 2, 7
    x = torch.randn(B, n, dims.hidden, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    pos = torch.arange(3, 3 + n)[None].expand(B, n)
    mask = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        want = ref(x, attention_mask=mask, position_ids=pos,
                   position_embeddings=LlamaRotaryEmbedding(cfg).double()(x, pos))
        want = want[0] if isinstance(want, tuple) else want
        got = mine(x, pos)
        h, delta = mine.split_forward(x, pos)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(h + delta, got, rtol=0, atol=1e-12)
