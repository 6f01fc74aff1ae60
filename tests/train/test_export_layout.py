"""A trained draft is exported in a layout `inspect` recognises and whose proposed spec loads it: one layer as
``midlayer.*`` (yuhuili / lmsys), several as ``layers.N.*`` throughout (SpecForge), never ``midlayer.*`` for layer 0
beside ``layers.1.*`` (the midlayer rule's inverse applied to layer 0 alone); an eagle1-speculators draft is exported
with speculators' own EAGLE-1 config, which speculators' reading and draftsmith both load."""
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
    text = Path(load_spec(base).source).read_text().replace(f"name: {base}", "name: two")
    assert "num_layers: auto" in text
    (tmp_path / "two.yaml").write_text(text.replace("num_layers: auto", "num_layers: 2"))
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
    found = inspect_checkpoint(out)
    assert found.match.spec == "eagle1-speculators" and not found.match.assumptions, found.match
    mine = draftsmith.assemble(spec, target=tiny / "target", draft=out, dtype="float64")
    back = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=tiny / "target", draft=out, dtype="float64")
    a, b = mine.draft.state_dict(), back.draft.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
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
    the tensors, and what the config says of itself (speculators_config: its verifier) is the source's."""
    from draftsmith.testing import write_eagle1_speculators

    src = write_eagle1_speculators(tmp_path / "src", tiny / "target", fusion_bias=True, heads=False)
    out = tmp_path / "out"
    run(job(out, spec="eagle1-speculators", from_draft=src, max_windows=4, config={"steps": 1}))
    cfg, was = (json.loads((f / "config.json").read_text()) for f in (out, src))
    assert cfg["speculators_config"] == was["speculators_config"] and cfg["speculators_model_type"] == "eagle"
    assert cfg["fusion_bias"] is True and "fusion_fc.bias" in names(out)
    assert cfg["transformer_layer_architecture"] == "LlamaDecoderLayer"
    draftsmith.assemble("eagle1-speculators", target=tiny / "target", draft=out)
