"""A trained draft is exported in a layout `inspect` recognises and whose proposed spec loads it: one layer as
``midlayer.*`` (yuhuili / lmsys), several as ``layers.N.*`` throughout (SpecForge), never ``midlayer.*`` for layer 0
beside ``layers.1.*`` (the midlayer rule's inverse applied to layer 0 alone); an eagle1-speculators draft is exported
with speculators' own EAGLE-1 config, and an eagle3-speculators one in the speculators format (``layers.N.*``, the
config ``convert --to speculators`` writes), which speculators' reading and draftsmith both load."""
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import draftsmith
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.specs.loader import load_spec
from draftsmith.train.pipeline import run


def names(folder):
    return set(load_file(str(folder / "model.safetensors")))


def two_layers(tmp_path, base):
    """``base`` with num_layers: 2, as a file."""
    (tmp_path / "two.yaml").write_text(f"name: two\nextends: {base}\ndraft: {{num_layers: 2}}\n")
    assert load_spec(tmp_path / "two.yaml").draft.num_layers == 2
    return tmp_path / "two.yaml"


@pytest.mark.parametrize("base", ["eagle3-llama", "eagle3.1-llama"])
def test_a_two_layer_draft_is_exported_as_layers_n_and_inspect_loads_it(job, tiny, tmp_path, base):
    spec, out = two_layers(tmp_path, base), tmp_path / "out"
    run(job(out, spec=spec, max_windows=4, config={"steps": 1}))
    written = names(out)
    assert not any(n.startswith("midlayer.") for n in written), sorted(written)
    assert {n.split(".")[1] for n in written if n.startswith("layers.")} == {"0", "1"}
    found = inspect_checkpoint(out)
    assert found.match is not None, sorted(written)
    back = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=tiny / "target")
    trained = draftsmith.assemble(spec, target=tiny / "target", draft=out)
    assert len(back.draft.layers) == 2
    mine, theirs = trained.draft.state_dict(), back.draft.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_a_one_layer_draft_keeps_the_midlayer_names(job, tmp_path):
    out = tmp_path / "out"
    run(job(out, max_windows=4, config={"steps": 1}))
    written = names(out)
    assert any(n.startswith("midlayer.") for n in written) and not any(n.startswith("layers.") for n in written)
    assert inspect_checkpoint(out).match is not None


def speculators_logits(folder, target, ids, hidden):
    """speculators' EagleSpeculator as it reads ``folder``: its config (speculators_model_type eagle, the layer's
    LlamaConfig under transformer_layer_config, fusion_bias, layernorms) builds fusion_fc and one LlamaDecoderLayer
    (input norm an identity without layernorms), each loaded strictly from the checkpoint's own names; embedding
    and head are the verifier's (attach_verifier), so the checkpoint holds nothing else but a frozen embed copy."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["speculators_model_type"] == "eagle" and cfg["architectures"][0] == "EagleSpeculator"
    assert "model_type" not in cfg and cfg["layernorms"] is False   # no top-level model_type: AutoConfig cannot read
    layer_cfg = LlamaConfig(**cfg["transformer_layer_config"])
    layer_cfg._attn_implementation = "eager"
    t = {k: v.double() for k, v in load_file(folder / "model.safetensors").items()}
    layer = LlamaDecoderLayer(layer_cfg, layer_idx=0).double()
    layer.input_layernorm = torch.nn.Identity()
    layer.load_state_dict({k.removeprefix("transformer."): v for k, v in t.items() if k.startswith("transformer.")})
    H = layer_cfg.hidden_size
    fusion = torch.nn.Linear(2 * H, H, bias=cfg["fusion_bias"]).double()
    fusion.load_state_dict({k.removeprefix("fusion_fc."): v for k, v in t.items() if k.startswith("fusion_fc.")})
    assert {k.split(".")[0] for k in t} <= {"transformer", "fusion_fc", "embed_tokens"}, sorted(t)
    x = fusion(torch.cat([target.model.embed_tokens(ids), hidden], -1))
    n = ids.shape[1]
    pos = torch.arange(n)[None]
    mask = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    x = layer(x, attention_mask=mask, position_ids=pos, position_embeddings=LlamaRotaryEmbedding(layer_cfg).double()(
        x, pos))
    return target.lm_head(x[0] if isinstance(x, tuple) else x)


def loaded_back(out, spec, target, family, *, assumes=True):
    """The export ``out`` detected as ``family`` (with no assumption said unless ``assumes``), loaded by that
    detection (float64): the same draft weights its trained ``spec`` loads."""
    found = inspect_checkpoint(out)
    assert found.match.spec == family and (assumes or not found.match.assumptions), found.match
    mine = draftsmith.assemble(spec, target=target, draft=out, dtype="float64")
    back = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, draft=out, dtype="float64")
    a, b = mine.draft.state_dict(), back.draft.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return back


@pytest.mark.parametrize("bias", ["auto", "true"])
def test_an_eagle1_speculators_export_is_speculators_config_and_loads_back(job, tiny, tmp_path, bias):
    """train --spec eagle1-speculators (or a copy of it, here one asking for a fusion bias) exports speculators'
    EAGLE-1 config beside its tensor names, as convert --to eagle1-speculators writes it: speculators' own reading
    computes what draftsmith's load of it does, and draftsmith loads it back (detected or by the spec) and decodes
    greedily as the target alone."""
    text = Path(load_spec("eagle1-speculators").source).read_text()
    assert "bias: auto" in text
    spec = tmp_path / "mine.yaml"
    spec.write_text(text.replace("name: eagle1-speculators", "name: mine").replace("bias: auto", f"bias: {bias}"))
    out = tmp_path / "out"
    run(job(out, spec=spec, max_windows=4, config={"steps": 1}))
    written, fusion_bias = names(out), bias == "true"
    assert ("fusion_fc.bias" in written) is fusion_bias and not any(n.startswith(("fc.", "layers.")) for n in written)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["fusion_bias"] is fusion_bias and "bias" not in cfg and "bias" not in cfg["transformer_layer_config"]
    assert cfg["transformer_layer_config"]["model_type"] == "llama" and cfg["transformer_layer_config"][
        "hidden_size"] == 64 and cfg["transformer_layer_config"]["torch_dtype"] == "bfloat16"
    back = loaded_back(out, spec, tiny / "target", "eagle1-speculators", assumes=False)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 258, (1, 7), generator=g)
    hidden = torch.randn(1, 7, 64, generator=g, dtype=torch.float64)
    with torch.no_grad():
        got, _ = back.draft(ids, hidden, torch.arange(7)[None], embed=back.target.model.embed_tokens,
                            from_target=True)
        got = back.draft.logits(got, back.target.lm_head)
        want = speculators_logits(out, back.target, ids, hidden)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    prompts = [[5, 9, 2, 7], [3]]
    assert [o.token_ids for o in back.generate(prompts, max_new_tokens=12)] == \
        [o.token_ids for o in back.generate_baseline(prompts, max_new_tokens=12)]


def test_a_speculators_eagle1_draft_trained_further_keeps_what_its_config_says_of_itself(job, tiny, tmp_path):
    """--from-draft of a speculators EAGLE-1 checkpoint: the export is in the same style, its fusion_bias read from
    the tensors, and what the config says of itself (speculators_config) is the source's, its verifier named by the
    target trained against where the source names none."""
    from draftsmith.testing import write_eagle1_speculators

    src = write_eagle1_speculators(tmp_path / "src", tiny / "target", fusion_bias=True, heads=False)
    out = tmp_path / "out"
    run(job(out, spec="eagle1-speculators", from_draft=src, max_windows=4, config={"steps": 1}))
    cfg, was = (json.loads((f / "config.json").read_text()) for f in (out, src))
    assert "name_or_path" not in was["speculators_config"]["verifier"]
    named = {"name_or_path": str(tiny / "target"), "architectures": ["LlamaForCausalLM"]}
    assert cfg["speculators_config"] == was["speculators_config"] | {"verifier": named}
    assert cfg["speculators_model_type"] == "eagle"
    assert cfg["fusion_bias"] is True and "fusion_fc.bias" in names(out)
    assert cfg["transformer_layer_architecture"] == "LlamaDecoderLayer"
    draftsmith.assemble("eagle1-speculators", target=tiny / "target", draft=out)


SPECULATORS_EAGLE3_NAMES = ("fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d", "embed_tokens.weight",
                            "input_norm.weight")   # speculators' Eagle3DraftModel, besides layers.N.*


def speculators_eagle3_logits(folder, target, ids, aux):
    """speculators' Eagle3DraftModel (and vLLM's speculators config reading) as they read ``folder``, strictly: the
    config keys they require (speculators_model_type eagle3, speculators_config's first proposal method's
    speculative_tokens and its verifier's name_or_path key, transformer_layer_config as a dict, no top-level
    model_type; norm_before_residual stated, as vLLM reads an absent one as true and speculators as false) and the
    tensor names they expect (fc, layers.N.* for the config's layer count, norm, lm_head, d2t / t2d), each module
    loaded strictly. Layer 0 is transformers' LlamaDecoderLayer with q/k/v over [embedding; hidden] (2H) and a
    hidden_norm: the embedding and the fused state normed apart, the residual the fused state (or its norm). Returns
    the logits over the draft vocabulary and each draft id's target id."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding

    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["speculators_model_type"] == "eagle3" and "model_type" not in cfg
    assert isinstance(cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"], int)
    assert "name_or_path" in cfg["speculators_config"]["verifier"]
    assert isinstance(cfg["transformer_layer_config"], dict) and isinstance(cfg["draft_vocab_size"], int)
    assert isinstance(cfg["norm_before_residual"], bool) and isinstance(cfg["norm_before_fc"], bool)
    assert not cfg["norm_before_fc"] and not cfg.get("fc_norm") and not cfg.get("norm_output")   # what this builds
    lc = LlamaConfig(**cfg["transformer_layer_config"])
    lc._attn_implementation = "eager"
    H, L = lc.hidden_size, lc.num_hidden_layers
    t = {k: v.double() if v.is_floating_point() else v for k, v in load_file(folder / "model.safetensors").items()}
    assert {n for n in t if not n.startswith("layers.")} <= set(SPECULATORS_EAGLE3_NAMES), sorted(t)
    assert {n.split(".")[1] for n in t if n.startswith("layers.")} == {str(i) for i in range(L)}, sorted(t)

    def loaded(module, prefix):
        module.double().load_state_dict({k.removeprefix(prefix): v for k, v in t.items() if k.startswith(prefix)})
        return module

    first = LlamaDecoderLayer(lc, layer_idx=0)
    for p in ("q", "k", "v"):
        old = getattr(first.self_attn, f"{p}_proj")
        setattr(first.self_attn, f"{p}_proj", torch.nn.Linear(2 * H, old.out_features, bias=lc.attention_bias))
    first.hidden_norm = LlamaRMSNorm(H, eps=lc.rms_norm_eps)
    layers = [loaded(first, "layers.0.")] + [loaded(LlamaDecoderLayer(lc, layer_idx=i), f"layers.{i}.")
                                            for i in range(1, L)]
    fc = loaded(torch.nn.Linear(aux.shape[-1], H, bias=False), "fc.")
    norm = loaded(LlamaRMSNorm(H, eps=lc.rms_norm_eps), "norm.")
    head = loaded(torch.nn.Linear(H, cfg["draft_vocab_size"], bias=False), "lm_head.")
    n = ids.shape[1]
    pos = torch.arange(n)[None]
    mask = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    rope = LlamaRotaryEmbedding(lc).double()
    hidden = fc(aux)
    normed = first.hidden_norm(hidden)
    x = torch.cat([first.input_layernorm(target.model.embed_tokens(ids)), normed], -1)
    x, _ = first.self_attn(x, position_embeddings=rope(x, pos), attention_mask=mask)
    x = (normed if cfg["norm_before_residual"] else hidden) + x
    x = x + first.mlp(first.post_attention_layernorm(x))
    for layer in layers[1:]:
        x = layer(x, attention_mask=mask, position_ids=pos, position_embeddings=rope(x, pos))
        x = x[0] if isinstance(x, tuple) else x
    return head(norm(x)), torch.arange(cfg["draft_vocab_size"]) + t["d2t"]


def eagle3_speculators_spec(tmp_path, layers):
    return "eagle3-speculators" if layers == 1 else two_layers(tmp_path, "eagle3-speculators")


@pytest.mark.parametrize("layers", [1, 2])
def test_an_eagle3_speculators_export_is_the_speculators_format_and_loads_back(job, tiny, tmp_path, layers):
    """train --spec eagle3-speculators exports speculators' names (layers.N.*, never midlayer.*) and the config
    convert --to speculators writes (a flat export converted there is the very same folder); detection names it
    eagle3-speculators, speculators' own reading computes what draftsmith's load does, and it decodes greedily as the
    target alone."""
    from draftsmith.convert.run import convert

    spec, out = eagle3_speculators_spec(tmp_path, layers), tmp_path / "out"
    run(job(out, spec=spec, max_windows=4, config={"steps": 1}))
    written = names(out)
    assert not any(n.startswith("midlayer.") for n in written), sorted(written)
    assert {n.split(".")[1] for n in written if n.startswith("layers.")} == {str(i) for i in range(layers)}
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["Eagle3Speculator"] and "model_type" not in cfg
    assert cfg["transformer_layer_config"]["model_type"] == "llama"
    assert cfg["transformer_layer_config"]["num_hidden_layers"] == layers and cfg["draft_vocab_size"] == 96
    # the default taps (2, L//2, L-3) are left unsaid: SGLang and vLLM read stated ids one layer apart
    assert "eagle_aux_hidden_state_layer_ids" not in cfg and "eagle_config" not in cfg
    assert {k: cfg[k] for k in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")} == dict.fromkeys(
        ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"), False)
    # the target trained against is the verifier (convert, which knows no target, writes the template's null)
    named = {"name_or_path": str(tiny / "target"), "architectures": ["LlamaForCausalLM"]}
    assert cfg["speculators_config"]["verifier"] == named
    # exactly what convert writes: through the flat layout (the old export) and back, the same folder bit for bit
    convert(out, "layers", tmp_path / "flat")
    convert(tmp_path / "flat", "speculators", tmp_path / "back")
    back_cfg = json.loads((tmp_path / "back" / "config.json").read_text())
    assert back_cfg["speculators_config"]["verifier"] == {"name_or_path": None, "architectures": None}
    back_cfg["speculators_config"]["verifier"] = named
    assert back_cfg == cfg
    a, b = load_file(out / "model.safetensors"), load_file(tmp_path / "back" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    back = loaded_back(out, spec, tiny / "target", "eagle3-speculators")
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 258, (1, 7), generator=g)
    aux = torch.randn(1, 7, 3 * 64, generator=g, dtype=torch.float64)
    with torch.no_grad():
        got, _ = back.draft(ids, aux, torch.arange(7)[None], embed=back.target.model.embed_tokens, from_target=True)
        got = back.draft.head_logits(got, back.draft.lm_head)
        want, to_target = speculators_eagle3_logits(out, back.target, ids, aux)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert torch.equal(to_target, back.draft.kept_ids())
    prompts = [[5, 9, 2, 7], [3]]
    assert [o.token_ids for o in back.generate(prompts, max_new_tokens=12)] == \
        [o.token_ids for o in back.generate_baseline(prompts, max_new_tokens=12)]


def test_an_eagle3_speculators_draft_trained_further_keeps_its_verifier_and_states_its_layers(job, tiny, tmp_path):
    """--from-draft of a speculators EAGLE-3 checkpoint keeps what its config says of itself (speculators_config:
    the verifier, the proposal); of a midlayer one whose config says 40 layers (published drafts do), the export's
    transformer_layer_config says the one layer it holds, which speculators and vLLM build."""
    from draftsmith.testing import edit_config, write_eagle3

    src = write_eagle3(tmp_path / "src", tiny / "target", layout="layers", config="speculators", draft_vocab=96,
                       aux_ids=[2, 4, 5])
    was = json.loads((src / "config.json").read_text())
    was["speculators_config"]["verifier"] = {"name_or_path": "org/target", "architectures": ["LlamaForCausalLM"]}
    was["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 3
    (src / "config.json").write_text(json.dumps(was))
    out = tmp_path / "out"
    run(job(out, spec="eagle3-speculators", from_draft=src, max_windows=4, config={"steps": 1}))
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["speculators_config"] == was["speculators_config"] and cfg["speculators_model_type"] == "eagle3"
    draftsmith.assemble("eagle3-speculators", target=tiny / "target", draft=out)

    old = write_eagle3(tmp_path / "old", tiny / "target", draft_vocab=96, aux_ids=[2, 4, 5])
    edit_config(old, num_hidden_layers=40)
    run(job(tmp_path / "out2", spec="eagle3-speculators", from_draft=old, max_windows=4, config={"steps": 1}))
    cfg = json.loads((tmp_path / "out2" / "config.json").read_text())
    assert cfg["transformer_layer_config"]["num_hidden_layers"] == 1
    # a flat source has none: the target trained against is named (its folder, its architectures)
    assert cfg["speculators_config"]["verifier"] == {"name_or_path": str(tiny / "target"),
                                                     "architectures": ["LlamaForCausalLM"]}
    assert "layers.0.hidden_norm.weight" in names(tmp_path / "out2")


def test_the_verifier_named_is_the_target_folder_as_given_where_no_source_names_one(tmp_path, monkeypatch):
    """with_verifier: the folder as the run was given it (a relative path stays relative, a link is not followed:
    no directory layout leaks into a shared checkpoint), architectures [] where the target states none (as
    speculators writes them), an empty name read as none, and a named verifier kept."""
    from draftsmith.train.draft_io import with_verifier

    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    template = {"speculators_config": {"algorithm": "eagle3", "verifier": {"name_or_path": None,
                                                                           "architectures": None}}}
    for name in (None, ""):
        config = json.loads(json.dumps(template))
        config["speculators_config"]["verifier"]["name_or_path"] = name
        got = with_verifier(config, Path("link"))
        assert got["speculators_config"] == {"algorithm": "eagle3",
                                             "verifier": {"name_or_path": "link", "architectures": []}}
        assert config["speculators_config"]["verifier"]["name_or_path"] == name   # the input is not changed
    named = {"speculators_config": {"verifier": {"name_or_path": "org/target", "architectures": ["X"]}}}
    assert with_verifier(named, Path("link")) == named
    assert with_verifier({"architectures": ["LlamaForCausalLM"]}, Path("link")) == {
        "architectures": ["LlamaForCausalLM"]}   # a flat config has no verifier
