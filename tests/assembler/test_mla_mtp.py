"""MLA EAGLE (DeepSeek and Mistral names) and DeepSeek-V3 MTP drafts: each loads from a checkpoint in its
published layout bit for bit, decodes greedily equal to target-only (chain and tree, float32), and the MTP layer
equals transformers' own MtpLayer; the MLA key cleanup and `attention: auto` as properties."""
import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load_file
from transformers import LlamaConfig
from transformers.modeling_layers import MtpLayer
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding

import draftsmith
from draftsmith.assembler.build import attention_name, rule_set
from draftsmith.assembler.config import MLA_KEYS, draft_hf_config
from draftsmith.components.attention import GQAttention
from draftsmith.components.mla import MLAttention
from draftsmith.components.rule_config import bind
from draftsmith.testing import edit_config, write_target
from draftsmith.testing.mla import MLA_SIZES, to_mistral, write_mla_eagle
from draftsmith.testing.mtp import write_mtp

PROMPTS = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10]]
SHAPES = [dict(topk=1, steps=4), dict(topk=4, steps=4, draft_tokens=10), dict(topk=2, steps=3, draft_tokens=6)]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("zoo")
    write_target(root / "llama", "llama", num_hidden_layers=4, seed=3)
    for layout in ("deepseek", "mistral"):
        write_mla_eagle(root / f"mla-{layout}", root / "llama", layout=layout)
    write_mla_eagle(root / "mla-noq", root / "llama", q_lora_rank=None, layers=1)
    write_target(root / "mtp-llama", "llama", num_hidden_layers=4, seed=4)
    write_mtp(root / "mtp-llama")
    write_target(root / "mtp-ds", "deepseek_v3", num_hidden_layers=2, seed=5, num_key_value_heads=4,
                 first_k_dense_replace=3, **MLA_SIZES)   # dense everywhere, the MTP layer (index 2) too
    write_mtp(root / "mtp-ds")
    return root


def assemble(spec, target, draft):
    return draftsmith.assemble(spec, target=target, draft=draft, dtype="float32")


CASES = {  # name: (spec, target folder, draft folder)
    "mla-deepseek": ("eagle-mla-deepseek", "llama", "mla-deepseek"),
    "mla-mistral": ("eagle-mla-mistral", "llama", "mla-mistral"),
    "mla-no-q-lora": ("eagle-mla-deepseek", "llama", "mla-noq"),
    "mtp-llama": ("deepseek-mtp", "mtp-llama", "mtp-llama"),
    "mtp-deepseek-v3": ("deepseek-mtp", "mtp-ds", "mtp-ds"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_greedy_equals_target_only_chain_and_tree(root, name):
    spec, target, draft = CASES[name]
    model = assemble(spec, root / target, root / draft)
    base = model.generate_baseline(PROMPTS, max_new_tokens=12, stop=[])
    for shape in SHAPES:
        out = model.generate(PROMPTS, max_new_tokens=12, stop=[], **shape)
        assert [o.token_ids for o in out] == [b.token_ids for b in base], shape


def test_mla_drafts_load_bit_for_bit_in_both_namings(root):
    ds = assemble("eagle-mla-deepseek", root / "llama", root / "mla-deepseek")
    mi = assemble("eagle-mla-mistral", root / "llama", root / "mla-mistral")
    ckpt = load_file(str(root / "mla-deepseek" / "model.safetensors"))
    native = load_file(str(root / "mla-mistral" / "model.safetensors"))
    assert "eagle_linear.weight" in native and "layers.1.attention.wkv_a_with_mqa.weight" in native
    state = ds.draft.state_dict()
    assert set(state) == {n.removeprefix("model.") for n in ckpt if n != "model.embed_tokens.weight"}
    for name, t in state.items():
        assert torch.equal(t, ckpt["model." + name]), name
        assert torch.equal(mi.draft.state_dict()[name], native[to_mistral("model." + name)]), name
    assert all(isinstance(layer.self_attn, MLAttention) for layer in ds.draft.layers) and len(ds.draft.layers) == 2
    assert ds.draft.layers[0].self_attn.rope.style == "interleaved"          # rope_interleave: true
    assert ds.draft_embed is ds.target.model.embed_tokens and ds.draft_head is ds.target.lm_head


def test_mtp_draft_reads_layer_L_of_the_targets_own_files(root):
    model = assemble("deepseek-mtp", root / "mtp-llama", root / "mtp-llama")
    ckpt = load_file(str(root / "mtp-llama" / "model.safetensors"))
    p = "model.layers.4."
    pairs = {"fc.enorm.weight": "enorm.weight", "fc.hnorm.weight": "hnorm.weight", "fc.eh_proj.weight":
             "eh_proj.weight", "norm.weight": "shared_head.norm.weight", "lm_head.weight": "shared_head.head.weight",
             "embed_tokens.weight": "embed_tokens.weight",
             "layers.0.self_attn.q_proj.weight": "self_attn.q_proj.weight",
             "layers.0.input_layernorm.weight": "input_layernorm.weight"}
    state = model.draft.state_dict()
    assert len(state) == sum(n.startswith(p) for n in ckpt)
    for ours, theirs in pairs.items():
        assert torch.equal(state[ours], ckpt[p + theirs]), ours
    assert len(model.target.model.layers) == 4   # the target itself ignores its declared MTP layer
    ds = assemble("deepseek-mtp", root / "mtp-ds", root / "mtp-ds")
    assert isinstance(ds.draft.layers[0].self_attn, MLAttention)   # attention: auto on a deepseek_v3 config


def test_mtp_layer_equals_transformers_mtp_layer(root):
    """Our fusion + block + shared_head.norm against transformers' MtpLayer with the same weights, plain causal
    attention over a whole sequence (transformers' layer has no position-0 zeroing: ours is switched off)."""
    model = assemble("deepseek-mtp", root / "mtp-llama", root / "mtp-llama")
    cfg = LlamaConfig(**json.loads((root / "mtp-llama" / "config.json").read_text()))
    cfg._attn_implementation = "eager"
    ref = MtpLayer(cfg, LlamaDecoderLayer, LlamaRMSNorm, layer_idx=0).eval()
    ckpt = load_file(str(root / "mtp-llama" / "model.safetensors"))
    p = "model.layers.4."
    theirs = {n[len(p):]: t for n, t in ckpt.items() if n.startswith(p)}
    state = {("mtp_block." + n if n.split(".")[0] in ("self_attn", "mlp", "input_layernorm",
                                                     "post_attention_layernorm") else n): t for n, t in theirs.items()}
    state["post_norm.weight"] = state.pop("shared_head.norm.weight")
    missing, _ = ref.load_state_dict(state, strict=False)
    assert not missing
    ids = torch.randint(0, 96, (2, 9), generator=torch.Generator().manual_seed(0))
    hidden = torch.randn(2, 9, 64, generator=torch.Generator().manual_seed(1))
    pos = torch.arange(9).expand(2, 9)
    emb = model.draft.embed_tokens(ids)
    mask = torch.full((9, 9), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        want = ref(emb, hidden, LlamaRotaryEmbedding(cfg)(emb, pos), mask, pos, None)
        model.draft.fc.zero_first_embedding = False
        out, _ = model.draft(ids, hidden, pos, embed=model.draft.embed_tokens, from_target=True)
        got = model.draft.norm(out)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_mtp_zeroes_the_embedding_at_position_0(root):
    model = assemble("deepseek-mtp", root / "mtp-llama", root / "mtp-llama")
    fc = model.draft.fc
    emb, hidden = torch.randn(1, 3, 64), torch.randn(1, 3, 64)
    with torch.no_grad():
        zeroed = fc.fuse(emb, hidden, True, torch.tensor([[0, 1, 2]]))
        kept = fc.fuse(emb, hidden, True, torch.tensor([[5, 1, 2]]))
        plain = fc.fuse(torch.cat([torch.zeros(1, 1, 64), emb[:, 1:]], 1), hidden, True, None)
    assert torch.equal(zeroed, plain) and torch.equal(zeroed[:, 1:], kept[:, 1:])
    assert not torch.equal(zeroed[:, 0], kept[:, 0])


def test_placeholders_bind_to_the_config_and_refuse_a_missing_key():
    assert bind(r"^model\.layers\.${num_hidden_layers}\.", {"num_hidden_layers": 61}, pattern=True) == \
        r"^model\.layers\.61\."
    spec = draftsmith.load_spec("deepseek-mtp")
    rules = rule_set(spec, draftsmith.default_registry(), {"num_hidden_layers": 3})
    assert rules.to_canonical("model.layers.3.enorm.weight")[0] == "fc.enorm.weight"
    assert rules.to_canonical("model.layers.3.self_attn.q_proj.weight")[0] == "layers.0.self_attn.q_proj.weight"
    assert rules.to_canonical("model.layers.2.self_attn.q_proj.weight")[0] is None   # the target's: ignored
    assert rules.to_canonical("model.layers.30.mlp.up_proj.weight")[0] is None       # 30 is not 3
    assert rules.from_canonical("fc.enorm.weight") == "model.layers.3.enorm.weight"
    with pytest.raises(draftsmith.SpecError) as err:   # every unbound item, at its dotted path, in the spec file
        rule_set(spec, draftsmith.default_registry(), {"hidden_size": 8, "num_layers": 3, "flag": True})
    text = str(err.value)
    assert text.startswith(spec.source) and "weights.rules.0: ${num_hidden_layers} cannot be bound: the draft's " \
        "config has no 'num_hidden_layers'" in text and "allowed: 'hidden_size', 'num_layers'" in text
    assert "Did you mean 'num_layers'?" in text and {p.path for p in err.value.problems} >= {"weights.rules.0",
                                                                                              "weights.ignore.0"}
    with pytest.raises(draftsmith.SpecError, match="holds True at 'num_hidden_layers', not an integer or string"):
        rule_set(spec, draftsmith.default_registry(), {"num_hidden_layers": True})


# --- MLA key cleanup and attention: auto, over random config dicts ------------------------------------------------

GQA = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96, vocab_size=96)
mla_fields = st.dictionaries(st.sampled_from(MLA_KEYS), st.none() | st.integers(1, 64))


@given(mla=mla_fields, nested=st.booleans())
def test_attention_auto_picks_mla_only_for_set_mla_fields(mla, nested):
    spec = draftsmith.load_spec("eagle3-llama")  # attention: gqa; auto is the spec default
    auto = spec.model_copy(update={"draft": spec.draft.model_copy(
        update={"attention": type(spec.draft.attention)(kind="auto")})})
    raw = ({"transformer_layer_config": {**GQA, **mla}} if nested else {**GQA, **mla})
    want = "mla" if any(v is not None for v in mla.values()) else "gqa"
    assert attention_name(auto, raw) == want
    assert attention_name(spec, raw) == spec.draft.attention.kind            # an explicit kind is obeyed


@given(nulls=st.lists(st.sampled_from(MLA_KEYS), unique=True))
def test_null_mla_fields_never_shadow_a_gqa_draft(nulls):
    """A GQA draft config with null MLA keys reads exactly like one without them."""
    plain = draft_hf_config(GQA).to_dict()
    shadowed = draft_hf_config({**GQA, **dict.fromkeys(nulls)}).to_dict()
    assert shadowed == plain
    assert all(k not in shadowed or shadowed[k] is not None for k in MLA_KEYS)


def test_auto_attention_builds_the_module_the_config_asks_for(root, tmp_path):
    spec = tmp_path / "auto.yaml"
    data = (draftsmith.load_spec("eagle-mla-deepseek").model_dump(mode="json", exclude_none=True))
    data["draft"]["attention"] = {"kind": "auto"}
    import yaml
    spec.write_text(yaml.safe_dump({**data, "name": "mla-auto"}))
    model = assemble(str(spec), root / "llama", root / "mla-deepseek")
    assert isinstance(model.draft.layers[0].self_attn, MLAttention)
    cfg = json.loads((root / "mla-deepseek" / "config.json").read_text())
    assert isinstance(cfg["kv_lora_rank"], int) and not isinstance(model.draft.layers[0].self_attn, GQAttention)


def test_a_checkpoint_of_two_mtp_layers_says_the_draft_is_the_first(root, tmp_path, caplog):
    # the spec's rules read model.layers.L alone: a second MTP layer (model.layers.L+1) was dropped without a word
    import logging

    folder = edit_config(root / "mtp-llama", tmp_path / "mtp2", num_nextn_predict_layers=2)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        assemble("deepseek-mtp", root / "mtp-llama", root / "mtp-llama")
        assert "MTP layers" not in caplog.text
        assemble("deepseek-mtp", folder, folder)
    assert "declares 2 MTP layers (num_nextn_predict_layers); the draft is the first, model.layers.4" in caplog.text
