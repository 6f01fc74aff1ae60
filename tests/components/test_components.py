"""Meta-test: every registered layer part builds through its factory (called the way draftsmith/assembler/parts.py
and build.py call it) and runs a forward of the right shape; plus rope, attention backends and RMSNorm against
their references."""

import typing

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb

import draftsmith
from draftsmith.components import backends
from draftsmith.components.dims import Dims
from draftsmith.components.layers import own_input
from draftsmith.components.rope import Rotary
from draftsmith.decoding.batching import causal_batch
from draftsmith.decoding.kvpool import PagedKVPool
from draftsmith.specs.resolve import resolve

REGISTRY = draftsmith.default_registry()
H, HEADS, KV_HEADS, HEAD_DIM, TARGET_WIDTH, B, T = 64, 4, 2, 24, 48, 2, 5  # nH*d = 96 != H
DIMS = Dims.from_config(LlamaConfig(hidden_size=H, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                                    head_dim=HEAD_DIM, intermediate_size=96, num_hidden_layers=8, vocab_size=96,
                                    # sizes an MLA attention reads (GQA ignores them)
                                    q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=6,
                                    v_head_dim=10))
POS = torch.arange(T).expand(B, T)


def registered(*kinds: str) -> list:
    return [pytest.param(k, n, id=f"{k}:{n}") for k in kinds for n, _ in REGISTRY.names(k)]


def sample_params(model: type[BaseModel]) -> dict:
    """The fewest params a spec must give: required booleans False, required numbers 1."""
    samples = {bool: False, int: 1, float: 1.0}

    def base(ann):  # `bool | None` (a flag that may be `auto`) samples as a bool
        return next((a for a in typing.get_args(ann) if a in samples), ann)

    return {name: samples[base(f.annotation)] for name, f in model.model_fields.items() if f.is_required()}


def make(kind: str, name: str, **context):
    comp, params = resolve(REGISTRY, kind, name, sample_params(REGISTRY.get(kind, name).params))
    return comp.factory(params, **context)


def norm(dim: int):
    return make("norm", "rms", dim=dim, eps=DIMS.eps)


def attention(name: str = "gqa", in_width: int = H, backend=backends.sdpa):
    return make("attention", name, dims=DIMS, layer_idx=0, in_width=in_width, backend=backend, norm=norm)


def mlp(name: str = "swiglu"):
    return make("mlp", name, dims=DIMS)


def layer(name: str = "llama", *, in_width: int = H, **slots):
    return make("layer", name, attn=attention(in_width=in_width), mlp=mlp(), norm=norm, dims=DIMS,
                input_norm=slots.pop("input_norm", True), hidden_norm=slots.pop("hidden_norm", False), **slots)


def fusion(name: str, target_width: int = H):
    return make("fusion", name, hidden=H, target_width=target_width, draft_config={}, target_layers=8)


BUILDERS = {"attention": lambda n: attention(n), "mlp": mlp, "norm": lambda n: make("norm", n, dim=H, eps=1e-6),
            "layer": lambda n: layer(n), "fusion": fusion}


@pytest.mark.parametrize("kind, name", registered(*BUILDERS))
def test_every_module_component_builds_on_meta_without_allocating(kind, name):
    with torch.device("meta"):
        module = BUILDERS[kind](name)
    params = list(module.parameters())
    assert params and all(p.is_meta for p in params)


@pytest.mark.parametrize("kind, name", registered("norm", "mlp"))
def test_norm_and_mlp_components_keep_the_shape(kind, name):
    x = torch.randn(B, T, H)
    assert BUILDERS[kind](name)(x).shape == (B, T, H)


@pytest.mark.parametrize("kind, name", registered("attention"))
@pytest.mark.parametrize("in_width", [H, 2 * H])  # 2H: EAGLE-3's first layer
def test_attention_components_run_plain_and_through_the_paged_pool(kind, name, in_width):
    attn = attention(name, in_width)
    x = torch.randn(B, T, in_width)
    with torch.no_grad():
        plain = attn(x, POS)
        pool = PagedKVPool([attn.cache_layout()], page_size=2, num_pages=8)
        seqs = [pool.add_sequence() for _ in range(B)]
        kv, pos = causal_batch(pool, seqs, [T] * B, "cpu")
        paged = attn(x, pos, kv)
    assert plain.shape == (B, T, H)
    torch.testing.assert_close(paged, plain, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind, name", registered("layer"))
def test_layer_components_run_with_every_slot_layout(kind, name):
    x, emb = torch.randn(B, T, H), torch.randn(B, T, H)
    ordinary = layer(name)
    no_input_norm = layer(name, input_norm=False)              # EAGLE-1 layer 0
    assert type(no_input_norm.input_layernorm) is torch.nn.Identity
    with torch.no_grad():
        for block in (ordinary, no_input_norm):
            assert block(x, POS, None, emb).shape == (B, T, H)


@pytest.mark.parametrize("kind, name", registered("fusion"))
def test_fusion_components_feed_a_first_layer_built_the_way_build_py_does(kind, name):
    fc = fusion(name)
    width = H * (len(fc.taps) if fc.taps else 1)               # aux taps, or the target's last hidden state
    first = layer(in_width=H * fc.first_in_factor, hidden_norm=fc.has_hidden_norm, mix=fc.first_mix,
                  norm_before_residual=fc.norm_before_residual)
    emb = torch.randn(B, T, H)
    with torch.no_grad():
        from_target = fc.fuse(emb, torch.randn(B, T, width), True)
        own = fc.fuse(emb, torch.randn(B, T, H), False)     # deeper tree nodes: the draft's own hidden state
        assert from_target.shape == own.shape == (B, T, H)
        assert first(from_target, POS, None, emb).shape == (B, T, H)
    second = layer(mix=own_input)
    assert second.self_attn.q_proj.in_features == H


def test_fusion_widths_follow_the_target_hidden_size():
    """EAGLE-3's fc reads k aux states of the target's width; EAGLE-1 feeds its own output back through fc and
    through the target's head, so a target of another width is refused, not built with a misleading fc."""
    fc = fusion("eagle3", TARGET_WIDTH)
    assert (fc.in_features, fc.out_features) == (3 * TARGET_WIDTH, H)
    with pytest.raises(draftsmith.SpecError, match=r"eagle1 needs the draft's hidden size \(64\) to equal the "
                                                   r"target's \(48\)"):
        fusion("eagle1", TARGET_WIDTH)
    assert fusion("eagle1").in_features == 2 * H


@pytest.mark.parametrize("kind, name", registered("attn_backend"))
def test_every_attention_backend_runs_gqa_with_and_without_a_mask(kind, name):
    try:
        fn = REGISTRY.get(kind, name).factory()
    except (RuntimeError, draftsmith.OptionError) as exc:  # an optional dependency not installed here
        if "pip install" not in str(exc):
            raise
        pytest.skip(str(exc))
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, HEADS, T, 16, generator=g)
    k, v = (torch.randn(B, KV_HEADS, T, 16, generator=g) for _ in range(2))
    mask = torch.rand(B, 1, T, T, generator=g) > 0.5
    mask[..., 0] = True
    for m in (None, mask):
        out = fn(q, k, v, m, 0.25)
        assert out.shape == (B, HEADS, T, 16)
        torch.testing.assert_close(out, backends.eager(q, k, v, m, 0.25), atol=1e-5, rtol=0)


# --- rope ---------------------------------------------------------------------------------------------------------

@given(half=st.integers(1, 16), seed=st.integers(0, 2**16), theta=st.sampled_from([100.0, 10000.0, 5e5]))
def test_rope_neox_and_interleaved_are_one_rotation_up_to_a_fixed_permutation(half, seed, theta):
    d = 2 * half
    cfg = LlamaConfig(hidden_size=d, num_attention_heads=1, rope_theta=theta)
    neox, inter = Rotary(cfg, d, "neox"), Rotary(cfg, d, "interleaved")
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(2, 6, 3, d, generator=g, dtype=torch.float64) for _ in range(2))
    pos = torch.randint(0, 4096, (2, 6), generator=g)
    # neox pairs dims (i, i + d/2), interleaved pairs (2i, 2i + 1): interleaved dim 2i is neox dim i
    perm = torch.tensor([j // 2 + (j % 2) * half for j in range(d)])
    nq, nk = neox(q, k, pos)
    iq, ik = inter(q[..., perm], k[..., perm], pos)
    torch.testing.assert_close(iq, nq[..., perm], atol=1e-12, rtol=0)
    torch.testing.assert_close(ik, nk[..., perm], atol=1e-12, rtol=0)
    assert not torch.allclose(nq, q)  # a rotation at all (positions of 0 only are astronomically unlikely)
    if half > 1:  # with one pair the two orders coincide; with more they are different maps
        assert not torch.allclose(inter(q, k, pos)[0], nq)


def test_rope_neox_matches_transformers():
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=20000.0)
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 7, 4, 16, generator=g) for _ in range(2))  # [B, T, heads, d]
    pos = torch.randint(0, 300, (2, 7), generator=g)
    cos, sin = LlamaRotaryEmbedding(cfg)(q, pos)
    want_q, want_k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
    got_q, got_k = Rotary(cfg, 16, "neox")(q, k, pos)
    torch.testing.assert_close(got_q, want_q.transpose(1, 2), atol=1e-6, rtol=0)
    torch.testing.assert_close(got_k, want_k.transpose(1, 2), atol=1e-6, rtol=0)


# --- attention backends -------------------------------------------------------------------------------------------

@given(T=st.integers(1, 9), extra=st.integers(0, 7), kv=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**16),
       masked=st.booleans())
def test_sdpa_equals_eager_on_random_masks_and_causal(T, extra, kv, seed, masked):
    g = torch.Generator().manual_seed(seed)
    S = T + extra
    q = torch.randn(2, 4, T, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, kv, S, 8, generator=g, dtype=torch.float64) for _ in range(2))
    mask = None
    if masked:  # random rows, each with at least one key (a random one, not always key 0)
        mask = torch.rand(2, 1, T, S, generator=g) > 0.6
        mask.scatter_(-1, torch.randint(0, S, (2, 1, T, 1), generator=g), True)
    torch.testing.assert_close(backends.sdpa(q, k, v, mask, 0.3), backends.eager(q, k, v, mask, 0.3),
                               atol=1e-10, rtol=0)


def test_causal_means_the_queries_are_the_last_positions():
    """mask=None with T < S: the T queries are positions S-T..S-1 (a decode step over a cache)."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 3, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(1, 2, 7, 8, generator=g, dtype=torch.float64) for _ in range(2))
    explicit = torch.ones(3, 7, dtype=torch.bool).tril(4)[None, None]
    for fn in (backends.sdpa, backends.eager):
        torch.testing.assert_close(fn(q, k, v, None, 0.5), backends.eager(q, k, v, explicit, 0.5),
                                   atol=1e-12, rtol=0)


# --- RMSNorm ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rms_norm_matches_transformers_llama_rms_norm(dtype):
    g = torch.Generator().manual_seed(0)
    ours, theirs = norm(H), LlamaRMSNorm(H, eps=DIMS.eps)
    weight = 1 + 0.1 * torch.randn(H, generator=g)
    with torch.no_grad():
        ours.weight.copy_(weight), theirs.weight.copy_(weight)
    ours, theirs = ours.to(dtype), theirs.to(dtype)
    x = (3 * torch.randn(B, T, H, generator=g)).to(dtype)
    with torch.no_grad():
        got, want = ours(x), theirs(x)
    assert got.dtype == want.dtype == dtype
    torch.testing.assert_close(got, want, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16, torch.int64,
                                   torch.float8_e4m3fn, torch.float8_e5m2])
def test_zero_unless_is_masked_fill_zero_with_nan_and_inf(dtype):
    """The static pool's dead rows are zeroed in place by bit patterns (floats) or masked_fill (any other dtype),
    on a strided view too: either way x.where(keep, 0), NaN and inf dropped where not kept and kept elsewhere."""
    from draftsmith.decoding.static_pool import zero_unless_

    x = torch.tensor([[1.5, float("nan"), float("inf"), -2.0], [float("-inf"), 3.0, float("nan"), -0.0]])
    x = x.nan_to_num(7.0, 8.0, -9.0).to(dtype) if not dtype.is_floating_point else x.to(dtype)
    keep = torch.tensor([[True, False, True, False], [False, True, True, False]])
    want = x.where(keep, 0)
    wide = torch.empty(*x.shape, 2, dtype=dtype)
    wide[..., 0], wide[..., 1] = x, x
    got = wide[..., 0]                                # a strided view
    zero_unless_(got, keep)
    exact = lambda t: t.float().nan_to_num(11.0, 12.0, -13.0)  # noqa: E731  (float8 has few ops on CPU)
    assert torch.equal(exact(wide[..., 1]), exact(x))  # the other half untouched
    assert got.dtype == dtype and torch.equal(exact(got), exact(want))


def test_a_layer_after_split_forward_equals_its_forward_and_old_mixes_still_serve():
    """split_forward's (h, delta) sums to forward's output, with a pending term added to the input; a mix written
    for (layer, x, emb), as a plugin's first layer might have, is still called without ``pending``."""
    from draftsmith.components.layers import DecoderLayer, own_input
    from draftsmith.components.norms import RMSNorm

    torch.manual_seed(0)
    H = 8
    attn = lambda x, pos, kv: x.tanh()            # noqa: E731  stand-ins: the block's wiring is what is tested
    mlp = torch.nn.Linear(H, H)
    layer = DecoderLayer(attn, mlp, input_layernorm=RMSNorm(H), post_attention_layernorm=RMSNorm(H))
    x, pending = torch.randn(2, 3, H), torch.randn(2, 3, H)
    h, delta = layer.split_forward(x, None, pending=pending)
    torch.testing.assert_close(h + delta, layer(x + pending, None))
    calls = []

    def old_mix(layer, x, emb):
        calls.append(1)
        return own_input(layer, x, emb)

    layer.mix = old_mix
    torch.testing.assert_close(sum(layer.split_forward(x, None)), layer(x, None))
    assert len(calls) == 2
    from draftsmith.components.layers import embed_concat  # EAGLE-3's input mix: [emb; x] at width 2H
    for before in (False, True):
        cat = DecoderLayer(lambda x, pos, kv: x[..., :H].tanh() + x[..., H:], mlp, input_layernorm=RMSNorm(H),
                           post_attention_layernorm=RMSNorm(H), hidden_norm=RMSNorm(H), mix=embed_concat,
                           norm_before_residual=before)
        emb = torch.randn(2, 3, H)
        torch.testing.assert_close(sum(cat.split_forward(x, None, emb=emb, pending=pending)),
                                   cat(x + pending, None, emb=emb))


def test_a_layer_type_without_split_forward_is_called_as_before():
    """run_layers stacks any layer: one without ``split_forward`` gets the settled stream through its own forward,
    (x, pos, kv) in a target and (x, pos, kv, emb) in a draft, and the pending terms around it are kept; so does a
    DecoderLayer subclass that overrides forward alone (its inherited split_forward would skip the override)."""
    from draftsmith.assembler.models import run_layers
    from draftsmith.components.layers import DecoderLayer
    from draftsmith.components.norms import RMSNorm

    H = 8

    class Plain(torch.nn.Module):        # a plugin layer written for the target's call, no emb argument
        def forward(self, x, pos, kv=None):
            return x * 2

    torch.manual_seed(0)
    block = lambda: DecoderLayer(lambda x, pos, kv: x.tanh(), torch.nn.Linear(H, H),  # noqa: E731
                                 input_layernorm=RMSNorm(H), post_attention_layernorm=RMSNorm(H))
    class Halved(DecoderLayer):          # a plugin subclass that overrides forward alone: its forward must run
        def forward(self, x, pos, kv=None, emb=None):
            return 0.5 * super().forward(x, pos, kv, emb)

    halved = Halved(lambda x, pos, kv: x.tanh(), torch.nn.Linear(H, H), input_layernorm=RMSNorm(H),
                    post_attention_layernorm=RMSNorm(H))
    layers = [block(), Plain(), halved, block()]
    x = torch.randn(2, 3, H)
    want = x
    for layer in layers:
        want = layer(want, None)
    got, pending, _ = run_layers(layers, x, None)
    torch.testing.assert_close(got + pending, want)
    _, _, captured = run_layers(layers, x, None, taps=[1, 4])
    settled = [a if b is None else a + b for a, b in (captured[1], captured[4])]   # a tap's add is left pending
    torch.testing.assert_close(settled[0], layers[0](x, None))
    torch.testing.assert_close(settled[1], want)
