"""EAGLE-1 / HASS in the older speculators layout (FORMATS.md): fusion_fc.*, transformer.*, and with layernorms an
embedding norm before fusion_fc, layer 0's input norm and a norm before the head. Detected in both variants, its
bias read from the config's fusion_bias, loaded bit for bit, computing what speculators' EagleSpeculator computes
(transformers' LlamaDecoderLayer as the oracle), and decoding losslessly."""
import pytest
import torch
from safetensors.torch import load_file
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding

import draftsmith
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.specs.loader import parse_spec
from draftsmith.testing import edit_config, write_eagle1_speculators, write_target

VARIANTS = [(False, True), (True, True), (True, False), (False, False)]   # (layernorms, fusion_bias)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("spec1") / "target", num_hidden_layers=4, seed=11)


def proposed(folder):
    found = inspect_checkpoint(folder)
    return found.match, parse_spec(found.spec)


@pytest.mark.parametrize("layernorms, fusion_bias", VARIANTS)
def test_both_variants_are_detected_and_load_bit_for_bit(target, tmp_path, layernorms, fusion_bias):
    d = write_eagle1_speculators(tmp_path / "d", target, layernorms=layernorms, fusion_bias=fusion_bias)
    match, spec = proposed(d)
    assert match.spec == "eagle1-speculators" and ("layernorms" in match.reason) == layernorms
    assert (spec.draft.norms.input, spec.draft.norms.final, spec.draft.fusion.params["embed_norm"]) == \
        (("all", True, True) if layernorms else ("not_first", False, False))
    model = draftsmith.assemble(spec, target=target, draft=d)
    stored = load_file(next(d.glob("*.safetensors")))
    canonical = {"fusion_fc.": "fc.", "transformer.": "layers.0.", "embedding_layernorm.": "fc.embed_norm.",
                 "pre_lm_head_layernorm.": "norm."}
    state = model.draft.state_dict()
    for name, tensor in stored.items():
        if name in ("embed_tokens.weight", "lm_head.weight"):   # frozen copies: the target's are used
            continue
        prefix = next(p for p in canonical if name.startswith(p))
        assert torch.equal(state[canonical[prefix] + name.removeprefix(prefix)], tensor), name
    assert (model.draft.fc.bias is not None) == fusion_bias   # read from the config's fusion_bias
    assert hasattr(model.draft.fc, "embed_norm") == layernorms


def oracle(folder, target_model, ids, hidden, layernorms):
    """speculators' EagleSpeculator forward, from transformers' parts and the checkpoint's own tensors: the target's
    embedding (normed with layernorms), fusion_fc over [embed; hidden], one LlamaDecoderLayer (its input norm an
    identity without layernorms), pre_lm_head_layernorm (with layernorms), the target's head."""
    import json

    raw = json.loads((folder / "config.json").read_text())["transformer_layer_config"]
    cfg = LlamaConfig(**raw)
    cfg._attn_implementation = "eager"
    t = load_file(next(folder.glob("*.safetensors")))
    layer = LlamaDecoderLayer(cfg, layer_idx=0).double()
    if not layernorms:
        layer.input_layernorm = torch.nn.Identity()
    layer.load_state_dict({k.removeprefix("transformer."): v.double() for k, v in t.items()
                           if k.startswith("transformer.")})
    emb = target_model.model.embed_tokens(ids)
    if layernorms:
        norm = LlamaRMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps).double()
        norm.weight.data = t["embedding_layernorm.weight"].double()
        emb = norm(emb)
    x = torch.nn.functional.linear(torch.cat([emb, hidden], -1), t["fusion_fc.weight"].double(),
                                   t["fusion_fc.bias"].double() if "fusion_fc.bias" in t else None)
    n = ids.shape[1]
    pos = torch.arange(n)[None]
    mask = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    x = layer(x, attention_mask=mask, position_ids=pos,
              position_embeddings=LlamaRotaryEmbedding(cfg).double()(x, pos))
    x = x[0] if isinstance(x, tuple) else x
    if layernorms:
        final = LlamaRMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps).double()
        final.weight.data = t["pre_lm_head_layernorm.weight"].double()
        x = final(x)
    return target_model.lm_head(x)


@pytest.mark.parametrize("layernorms, fusion_bias", VARIANTS[:3])
def test_the_draft_computes_what_the_speculators_model_computes(target, tmp_path, layernorms, fusion_bias):
    d = write_eagle1_speculators(tmp_path / "d", target, layernorms=layernorms, fusion_bias=fusion_bias, std=0.3)
    _, spec = proposed(d)
    model = draftsmith.assemble(spec, target=target, draft=d, dtype="float64")
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 64, (1, 7), generator=g)
    hidden = torch.randn(1, 7, model.target.model.embed_tokens.embedding_dim, generator=g, dtype=torch.float64)
    with torch.no_grad():
        out, _ = model.draft(ids, hidden, torch.arange(7)[None], embed=model.target.model.embed_tokens,
                             from_target=True)
        got = model.draft.logits(out, model.target.lm_head)
        want = oracle(d, model.target, ids, hidden, layernorms)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)   # draftsmith's RMSNorm runs in float32


@pytest.mark.parametrize("layernorms", [False, True])
def test_it_decodes_as_the_target_alone_chain_and_tree(target, tmp_path, layernorms):
    d = write_eagle1_speculators(tmp_path / "d", target, layernorms=layernorms, std=0.3)
    _, spec = proposed(d)
    model = draftsmith.assemble(spec, target=target, draft=d)
    prompts = [[5, 9, 2, 7], [3]]
    want = [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=16)]
    for topk in (1, 3):
        assert [o.token_ids for o in model.generate(prompts, max_new_tokens=16, topk=topk)] == want


def test_the_plain_spec_on_a_layernorms_checkpoint_is_told_what_inspect_proposes(target, tmp_path):
    d = write_eagle1_speculators(tmp_path / "d", target, layernorms=True)
    with pytest.raises(draftsmith.errors.DraftsmithError) as info:
        draftsmith.assemble("eagle1-speculators", target=target, draft=d)
    text = str(info.value) + "".join(getattr(info.value, "__notes__", ()))
    assert "unexpected: 'embedding_layernorm.weight' -> 'fc.embed_norm.weight'" in text
    assert ("is detected as eagle1-speculators (fusion_fc and transformer.* with embedding_layernorm" in text and
            "with norms.input: all, norms.final: true, fusion.embed_norm: true: `draftsmith inspect" in text), text


@pytest.mark.parametrize("layernorms", [False, True])
def test_every_name_writes_back_to_itself(target, tmp_path, layernorms):
    """Export and convert name tensors through the rules' inverses: the embedding norm goes back to
    embedding_layernorm, not to fusion_fc.embed_norm (the broader fusion_fc rule's inverse also matches it)."""
    from draftsmith.assembler.build import rule_set
    from draftsmith.registry import default_registry

    d = write_eagle1_speculators(tmp_path / "d", target, layernorms=layernorms)
    _, spec = proposed(d)
    rules = rule_set(spec, default_registry(), {})
    for name in load_file(next(d.glob("*.safetensors"))):
        canonical, _ = rules.to_canonical(name)
        if canonical is not None:   # the frozen embed_tokens / lm_head copies are ignored
            assert rules.from_canonical(canonical) == name


@pytest.mark.parametrize("layernorms", [False, True])
def test_a_layernorms_flag_the_tensors_contradict_is_said_and_its_keys_are_read(target, tmp_path, layernorms):
    d = write_eagle1_speculators(tmp_path / "d", target, layernorms=layernorms)
    assert inspect_checkpoint(d).match.assumptions == ()          # flag and tensors agree: nothing to say
    edit_config(d, layernorms=not layernorms)
    found = inspect_checkpoint(d)
    assert found.match.assumptions == (f"config layernorms={str(not layernorms).lower()} but embedding_layernorm is "
                                       f"{'present' if layernorms else 'absent'} (the tensor names win)",)
    assert not {"fusion_bias", "layernorms"} & set(found.unread)


def test_another_familys_stock_spec_is_told_every_setting_of_the_proposal(target, tmp_path):
    """eagle-mistral already holds norms {input: all, final: true}; the proposal is another spec, so all its
    settings are said (only the same spec's note leaves out what it already holds)."""
    d = write_eagle1_speculators(tmp_path / "d", target, layernorms=True)
    with pytest.raises(draftsmith.errors.DraftsmithError) as info:
        draftsmith.assemble("eagle-mistral", target=target, draft=d)
    notes = "".join(getattr(info.value, "__notes__", ()))
    assert "with norms.input: all, norms.final: true, fusion.embed_norm: true:" in notes, notes


def test_a_plugin_detectors_answer_is_told_too(target, tmp_path):
    from draftsmith.hooks import LayoutMatch, hookimpl

    class Claims:
        @hookimpl
        def draftsmith_detect_layout(self, config, tensor_names):
            return LayoutMatch("eagle1-llama", "a plugin's reading " + "r" * 400)

    registry = draftsmith.build_registry(plugins=[("claims", Claims())], entry_points=False)
    d = write_eagle1_speculators(tmp_path / "d", target, layernorms=True)
    with pytest.raises(draftsmith.errors.DraftsmithError) as info:
        draftsmith.assemble("eagle1-speculators", target=target, draft=d, registry=registry)
    notes = "".join(getattr(info.value, "__notes__", ()))
    reason = ("a plugin's reading " + "r" * 400)
    assert f"is detected as eagle1-llama ({reason[:148]}...{reason[-148:]}): `draftsmith inspect" in notes, notes
