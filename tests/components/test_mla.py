"""MLA attention: parity with transformers' DeepseekV3Attention (float32, 1e-4), the paged pool path equals the
plain path, and tree compaction moves the latent and rope parts bit for bit (invariant 14)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import DeepseekV3Config
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds

from draftsmith.components import backends
from draftsmith.components.attention import KVBatch
from draftsmith.components.dims import Dims
from draftsmith.components.mla import MLAParams, mla
from draftsmith.components.norms import RMSNorm
from draftsmith.decoding.batching import causal_batch, kv_batch
from draftsmith.decoding.kvpool import PagedKVPool

ATOL = 1e-4
YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 16,
        "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}


def config(**over) -> DeepseekV3Config:
    base = dict(hidden_size=48, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=24, kv_lora_rank=16,
                qk_nope_head_dim=8, qk_rope_head_dim=6, v_head_dim=10, intermediate_size=64, vocab_size=32,
                num_hidden_layers=1, first_k_dense_replace=1, rms_norm_eps=1e-6, max_position_embeddings=256)
    cfg = DeepseekV3Config(**{**base, **over})
    cfg._attn_implementation = "eager"
    return cfg


def pair(cfg, seed=0, backend=backends.sdpa):
    """transformers' attention with random weights, and draftsmith's MLA holding the same tensors."""
    torch.manual_seed(seed)
    ref = ds.DeepseekV3Attention(cfg, layer_idx=0).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if p.dim() == 1 else 0.0))
    dims = Dims.from_config(cfg)
    ours = mla(MLAParams(), dims=dims, layer_idx=0, in_width=cfg.hidden_size, backend=backend,
               norm=lambda d: RMSNorm(d, cfg.rms_norm_eps))
    missing, unexpected = ours.load_state_dict(ref.state_dict(), strict=False)
    assert not unexpected and missing == []
    return ref.eval(), ours.eval()


def reference(ref, cfg, x, pos):
    rotary = ds.DeepseekV3RotaryEmbedding(cfg)
    T = x.shape[1]
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        return ref(x, rotary(x, pos), mask)[0]


CASES = {
    "lora-interleave": {},
    "no-q-lora": {"q_lora_rank": None},
    "neox": {"rope_interleave": False},
    "yarn-mscale": {"rope_parameters": YARN},
    "bias": {"attention_bias": True},
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("backend", [backends.sdpa, backends.eager], ids=["sdpa", "eager"])
def test_mla_matches_transformers(name, backend):
    cfg = config(**CASES[name])
    ref, ours = pair(cfg, backend=backend)
    x = torch.randn(2, 11, cfg.hidden_size, generator=torch.Generator().manual_seed(1))
    pos = torch.arange(11).expand(2, 11)
    want = reference(ref, cfg, x, pos)
    with torch.no_grad():
        got = ours(x, pos)
    assert want.std() > 0.1
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    assert ours.cache_layout() == {"latent": (16,), "rope": (6,)}


def test_yarn_changes_the_softmax_scale():
    assert pair(config(rope_parameters=YARN))[1].scale != pair(config())[1].scale


def test_missing_mla_field_is_refused_by_name():
    cfg = config()
    cfg.v_head_dim = None
    with pytest.raises(ValueError, match="missing or null: v_head_dim"):
        mla(MLAParams(), dims=Dims.from_config(cfg), layer_idx=0, in_width=48, backend=backends.sdpa,
            norm=lambda d: RMSNorm(d))


def test_paged_prefill_then_decode_equals_plain_forward():
    cfg = config()
    _, ours = pair(cfg)
    x = torch.randn(1, 9, cfg.hidden_size, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = ours(x, torch.arange(9)[None])
        pool = PagedKVPool([ours.cache_layout()], page_size=2, num_pages=2)
        seq = pool.add_sequence()
        kv, pos = causal_batch(pool, [seq], [5], "cpu")
        got = [ours(x[:, :5], pos, kv)]
        pool.commit(seq)
        for t in range(5, 9):
            kv, pos = causal_batch(pool, [seq], [1], "cpu")
            got.append(ours(x[:, t:t + 1], pos, kv))
            pool.commit(seq)
    torch.testing.assert_close(torch.cat(got, 1), want, atol=ATOL, rtol=0)


@settings(max_examples=15)
@given(prefix=st.integers(1, 6), n=st.integers(2, 6), data=st.data())
def test_compaction_moves_latent_and_rope_bit_for_bit(prefix, n, data):
    """Invariant 14 on a real MLA layer: after verifying a random tree and committing a root-to-node path,
    KV_new[prev + d] == KV_verify[select[d]] in both named tensors, KV[:prev] is unchanged, and the next
    token's attention equals a fresh pool that only ever saw the committed tokens."""
    cfg = config()
    _, ours = pair(cfg)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 99)))
    parents = [-1] + [data.draw(st.integers(0, i - 1)) for i in range(1, n)]
    mask = torch.eye(n, dtype=torch.bool)
    depth = torch.zeros(n, dtype=torch.long)
    for i in range(1, n):
        mask[i] |= mask[parents[i]]
        depth[i] = depth[parents[i]] + 1
    leaf = data.draw(st.integers(0, n - 1))
    select = mask[leaf].nonzero()[:, 0]                                   # the path root..leaf, increasing
    x_prefix = torch.randn(1, prefix, cfg.hidden_size, generator=gen)
    x_tree = torch.randn(1, n, cfg.hidden_size, generator=gen)
    x_next = torch.randn(1, 1, cfg.hidden_size, generator=gen)
    with torch.no_grad():
        pool = PagedKVPool([ours.cache_layout()], page_size=1, num_pages=4)
        seq = pool.add_sequence()
        kv, pos = causal_batch(pool, [seq], [prefix], "cpu")
        ours(x_prefix, pos, kv)
        pool.commit(seq)
        before = {k: v[0].clone() for k, v in pool.read(0, pool.slots([seq], [prefix])).items()}
        kv, pos = kv_batch(pool, [seq], [n], torch.arange(n)[None], mask[None], depth[None], "cpu")
        ours(x_tree, pos, kv)
        verify = {k: v[0].clone() for k, v in pool.read(0, pool.slots([seq], [prefix + n])).items()}
        pool.commit(seq, select)
        after = {k: v[0] for k, v in pool.read(0, pool.slots([seq], [pool.length(seq)])).items()}
        assert pool.length(seq) == prefix + len(select)
        for name in ("latent", "rope"):
            assert torch.equal(after[name][:prefix], before[name])
            assert torch.equal(after[name][prefix:], verify[name][prefix + select])
        kv, pos = causal_batch(pool, [seq], [1], "cpu")
        got = ours(x_next, pos, kv)
        fresh = PagedKVPool([ours.cache_layout()], page_size=1, num_pages=4)
        s2 = fresh.add_sequence()
        xs = torch.cat([x_prefix, x_tree[:, select], x_next], 1)
        positions = torch.cat([torch.arange(prefix), prefix + depth[select], torch.tensor([prefix + len(select)])])
        kv2 = KVBatch(fresh, fresh.extend(s2, xs.shape[1])[None], fresh.slots([s2], [xs.shape[1]]), None)
        want = ours(xs, positions[None], kv2)[:, -1:]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


# --- softmax scale, rope frequencies and defaults, against transformers --------------------------------------------

SCALES = {
    "yarn-mscale": YARN,
    "yarn-without-mscale_all_dim": {k: v for k, v in YARN.items() if k != "mscale_all_dim"},
    "yarn-small-factor": {**YARN, "factor": 1.5},
    "yarn-factor-below-one": {**YARN, "factor": 0.5},
    "yarn-mscale_all_dim-2": {**YARN, "mscale_all_dim": 2.0},
    "linear-mscale": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0, "mscale_all_dim": 1.0},
    "default-with-stray-fields": {"rope_type": "default", "rope_theta": 10000.0, "factor": 4.0, "mscale_all_dim": 1.0},
}


@pytest.mark.parametrize("name", sorted(SCALES))
def test_softmax_scale_is_deepseeks_yarn_mscale_rule(name):
    from types import SimpleNamespace

    from draftsmith.components.mla import softmax_scale

    rope = SCALES[name]
    want = ds.yarn_apply_mscale(dict(rope), 14**-0.5)          # transformers' DeepseekV3Attention.scaling
    assert softmax_scale(SimpleNamespace(rope_parameters=dict(rope)), 14) == pytest.approx(want, rel=1e-12)
    # an older config names the same dict rope_scaling, and may say "type" for "rope_type"
    legacy = {("type" if k == "rope_type" else k): v for k, v in rope.items()}
    assert softmax_scale(SimpleNamespace(rope_scaling=legacy), 14) == pytest.approx(want, rel=1e-12)


def test_yarn_scale_and_rotation_match_transformers_when_the_config_says_a_llama_head_dim():
    # a draft config built Llama-style says head_dim = hidden / heads (12); rope still spans qk_rope_head_dim (6)
    cfg = config(rope_parameters=YARN)
    ref, _ = pair(cfg)
    llama_style = config(rope_parameters=YARN)
    llama_style.head_dim = 12
    ours = mla(MLAParams(), dims=Dims.from_config(llama_style), layer_idx=0, in_width=48, backend=backends.sdpa,
               norm=lambda d: RMSNorm(d, cfg.rms_norm_eps))
    ours.load_state_dict(ref.state_dict())
    assert llama_style.head_dim == 12                          # the caller's config is not modified
    assert ours.scale == pytest.approx(ref.scaling, rel=1e-12)
    x = torch.randn(1, 7, 48, generator=torch.Generator().manual_seed(3))
    pos = torch.arange(7)[None]
    with torch.no_grad():
        torch.testing.assert_close(ours(x, pos), reference(ref, cfg, x, pos), atol=ATOL, rtol=0)


def _generic_mla_config():
    # an MLA config that is not a DeepseekV3Config (a converted or hand-written one): it states the MLA sizes but
    # neither rope_interleave nor attention_bias, so transformers' DeepseekV3Config defaults must apply
    from transformers import PretrainedConfig

    cfg = PretrainedConfig(hidden_size=48, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=24,
                           kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=6, v_head_dim=10, intermediate_size=64,
                           vocab_size=32, num_hidden_layers=1, rms_norm_eps=1e-6)
    assert not hasattr(cfg, "rope_interleave") and not hasattr(cfg, "attention_bias")
    return cfg


def test_a_config_without_rope_interleave_or_attention_bias_gets_deepseek_v3s_defaults():
    ds_defaults = config()
    assert ds_defaults.rope_interleave is True and ds_defaults.attention_bias is False
    cfg = _generic_mla_config()
    ours = mla(MLAParams(), dims=Dims.from_config(cfg), layer_idx=0, in_width=48, backend=backends.sdpa,
               norm=lambda d: RMSNorm(d))
    assert ours.rope.style == "interleaved"
    assert all(lin.bias is None for lin in ours.modules() if isinstance(lin, torch.nn.Linear))
    assert mla(MLAParams(rope="neox"), dims=Dims.from_config(cfg), layer_idx=0, in_width=48, backend=backends.sdpa,
               norm=lambda d: RMSNorm(d)).rope.style == "neox"


def test_a_directly_built_layer_defaults_to_no_bias_and_the_plain_softmax_scale():
    from draftsmith.components.mla import MLADims, MLAttention
    from draftsmith.components.rope import Rotary

    cfg = config()
    m = MLADims.from_config(cfg, 4)
    layer = MLAttention(Dims.from_config(cfg), m, in_width=48, layer_idx=0, rope=Rotary(cfg, 6), backend=backends.sdpa,
                        norm=lambda d: RMSNorm(d))
    assert layer.scale == pytest.approx(ds.DeepseekV3Attention(cfg, layer_idx=0).scaling) == 14**-0.5
    assert all(lin.bias is None for lin in layer.modules() if isinstance(lin, torch.nn.Linear))


def test_params_and_dims_are_frozen():
    import dataclasses

    from pydantic import ValidationError

    from draftsmith.components.mla import MLADims

    with pytest.raises(ValidationError, match="frozen"):
        MLAParams().rope = "neox"
    with pytest.raises(dataclasses.FrozenInstanceError):
        MLADims.from_config(config(), 4).heads = 8

