"""The draft zoo: every built-in family loads a checkpoint written in its exact published layout (names and config
fields), bit for bit; decodes greedily equal to target-only (chain and tree); and `inspect` on it prints a spec that
loads it. Structure checks: only layer 0 of a multi-layer EAGLE-3 takes the 2H input and hidden_norm."""
import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components.norms import RMSNorm
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.convert.run import convert
from draftsmith.testing import edit_config, write_eagle3, write_target
from draftsmith.testing.mistral import write_mistral_eagle

H = 64

# name: (spec, writer, writer kwargs, canonical name of a checkpoint name)
FAMILIES = {
    "eagle3-midlayer": ("eagle3-llama", write_eagle3, dict(draft_vocab=40)),
    "eagle3-layers-3": ("eagle3-llama", write_eagle3, dict(layout="layers", layers=3, aux_ids=[1, 4, 6])),
    "eagle3-speculators-2": ("eagle3-speculators", write_eagle3,
                             dict(layout="layers", layers=2, config="speculators", aux_ids=[1, 3, 6], draft_vocab=40,
                                  flags={"norm_before_residual": True})),
    "eagle3.1-5aux": ("eagle3.1-llama", write_eagle3,
                      dict(layout="layers", layers=2, fc_norm=True, aux_ids=[1, 2, 4, 6, 7],
                           ids_key="target_layer_ids", flags={"norm_before_residual": False})),
    "eagle3.1-speculators": ("eagle3-speculators", write_eagle3,
                             dict(layout="layers", config="speculators", fc_norm=True, aux_ids=[0, 4, 8],
                                  flags={"norm_output": True})),
    "eagle3.1-nemo": ("eagle3.1-llama", write_eagle3, dict(layout="nemo", fc_norm=True, embed=True,
                                                           flags={"norm_before_residual": False})),
    "eagle3-nemo": ("eagle3-llama", write_eagle3, dict(layout="nemo", layers=2, embed=True, draft_vocab=40,
                                                       aux_ids=[1, 3, 6])),   # no fc_norm: plain EAGLE-3
    "eagle3-norm-before-fc": ("eagle3-norm-before-fc", write_eagle3,
                              dict(norm_before_fc=True, flags={"norm_before_residual": True})),
    "eagle-mistral": ("eagle-mistral", write_mistral_eagle, dict()),
}


def canonical(name: str) -> str:
    for old, new in (("midlayer.", "layers.0."), ("model.fc_norm.", "fc.aux_norm."), ("fc_norm.", "fc.aux_norm."),
                     ("input_norm.", "fc.input_norm."), ("eagle_linear.", "fc.")):
        if name.startswith(old):
            return new + name[len(old):]
    name = name.removeprefix("model.")
    from draftsmith.testing.mistral import NATIVE
    for hf, native in NATIVE.items():
        name = name.replace(f".{native}.", f".{hf}.")
    return name


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_target(tmp_path_factory.mktemp("zoo-target"), "llama", num_hidden_layers=8, seed=3)


@pytest.fixture(scope="module")
def zoo(target, tmp_path_factory):
    made = {}
    for name, (spec, write, kw) in FAMILIES.items():
        folder = write(tmp_path_factory.mktemp(name) / "draft", target, **kw)
        made[name] = (spec, folder, draftsmith.assemble(spec, target=target, draft=folder, dtype="float64"))
    return made


def stored(folder: Path) -> dict[str, torch.Tensor]:
    files = sorted(folder.glob("*.safetensors"))
    assert len(files) == 1
    return load_file(str(files[0]))


@pytest.mark.parametrize("name", FAMILIES)
def test_family_loads_its_published_layout_bit_for_bit(zoo, name):
    _, folder, model = zoo[name]
    state = model.draft.state_dict()
    kept = {canonical(n): t for n, t in stored(folder).items() if not n.endswith("embed_tokens.weight")}
    assert set(state) == set(kept)
    for n, t in kept.items():
        assert torch.equal(state[n].to(t.dtype), t), n


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("shape", [dict(topk=1, steps=4), dict(topk=4, steps=4, draft_tokens=10)],
                         ids=["chain", "tree"])
def test_family_decodes_greedily_equal_to_the_target_alone(zoo, name, shape):
    model = zoo[name][2]
    prompts = [[5, 6, 7, 8], [1, 2]]
    spec = model.generate(prompts, max_new_tokens=14, stop=[], **shape)
    base = model.generate_baseline(prompts, max_new_tokens=14, stop=[])
    assert [s.token_ids for s in spec] == [b.token_ids for b in base]


@pytest.mark.parametrize("name", FAMILIES)
def test_inspect_names_the_family_and_prints_a_spec_that_loads_it(zoo, target, name):
    spec_name, folder, model = zoo[name]
    found = inspect_checkpoint(folder)
    assert found.match.spec == spec_name
    spec = draftsmith.parse_spec(found.spec, source="inspect output")
    again = draftsmith.assemble(spec, target=target, dtype="float64")
    assert again.draft.taps == model.draft.taps and len(again.draft.layers) == len(model.draft.layers)
    for a, b in zip(again.draft.state_dict().values(), model.draft.state_dict().values()):
        assert torch.equal(a, b)


def test_multi_layer_eagle3_only_layer_0_takes_2h_and_hidden_norm(zoo):
    layers = zoo["eagle3-layers-3"][2].draft.layers
    assert len(layers) == 3
    assert layers[0].self_attn.q_proj.in_features == 2 * H and isinstance(layers[0].hidden_norm, RMSNorm)
    for layer in layers[1:]:
        assert layer.self_attn.q_proj.in_features == H and type(layer.hidden_norm) is nn.Identity
        assert isinstance(layer.input_layernorm, RMSNorm)


def test_speculators_flags_and_ids_come_from_the_config(zoo):
    d = zoo["eagle3-speculators-2"][2].draft
    assert d.taps == (1, 3, 6) and d.layers[0].norm_before_residual is True
    assert d.fc.norm_output == "head" and not d.feed_post_norm
    e31 = zoo["eagle3.1-speculators"][2].draft
    assert e31.fc.norm_output == "feed_back" and e31.feed_post_norm and len(e31.fc.aux_norm) == 3


def test_five_aux_layers_from_top_level_target_layer_ids(zoo):
    d = zoo["eagle3.1-5aux"][2].draft
    assert d.taps == (1, 2, 4, 6, 7) and d.fc.in_features == 5 * H and len(d.fc.aux_norm) == 5


def test_mistral_eagle_shape(zoo):
    d = zoo["eagle-mistral"][2].draft
    assert len(d.layers) == 2 and d.feed_post_norm and isinstance(d.norm, RMSNorm)
    assert all(isinstance(layer.input_layernorm, RMSNorm) for layer in d.layers)
    assert d.fc.bias is None and d.fc.in_features == 2 * H
    assert d.layers[0].self_attn.rope.style == "interleaved"


def test_mistral_rope_interleaved_on_native_rows_equals_neox_on_permuted_rows(zoo, target, tmp_path):
    """The one spec choice: rope interleaved on Mistral's rows, or neox after `convert --to layers` permuted them."""
    native = zoo["eagle-mistral"][2]
    hf = convert(zoo["eagle-mistral"][1], "layers", tmp_path / "hf")
    assert hf["rope_interleave"] is False
    found = inspect_checkpoint(tmp_path / "hf")
    assert found.match.spec == "eagle-mistral" and found.spec["draft"]["attention"]["rope"] == "neox"
    permuted = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, dtype="float64")
    assert not torch.equal(permuted.draft.layers[0].self_attn.q_proj.weight,
                           native.draft.layers[0].self_attn.q_proj.weight)
    ids, pos = torch.tensor([[3, 9, 4, 1, 7]]), torch.arange(5)[None]
    hidden = torch.randn(1, 5, H, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    outs = []
    for m in (native, permuted):
        with torch.no_grad():
            out, feed = m.draft(ids, hidden, pos, embed=m.draft_embed, from_target=True)
        outs.append((out, feed, m.draft.logits(out, m.draft_head)))
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)
    # and the wrong choice (neox on native rows) is a different draft
    wrong = draftsmith.parse_spec({**found.spec, "checkpoints": {"draft": str(zoo["eagle-mistral"][1])}})
    with torch.no_grad():
        w = draftsmith.assemble(wrong, target=target, dtype="float64")
        out, _ = w.draft(ids, hidden, pos, embed=w.draft_embed, from_target=True)
    assert not torch.allclose(out, outs[0][0])


def test_absolute_d2t_is_read_as_target_ids_when_the_spec_says_so(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=40, d2t="absolute")
    with pytest.raises(draftsmith.assembler.vocab.VocabMapError):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    found = inspect_checkpoint(draft)
    assert found.spec["draft"]["vocab"]["d2t"] == "absolute"
    assert any("vocab.d2t: absolute" in a for a in found.match.assumptions)
    model = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target)
    offsets = write_eagle3(tmp_path / "o", target, draft_vocab=40)
    ref = draftsmith.assemble("eagle3-llama", target=target, draft=offsets)
    assert torch.equal(model.draft.d2t, ref.draft.d2t)


def test_a_default_taken_is_said_once_on_one_line(target, tmp_path, caplog):
    draft = write_eagle3(tmp_path / "d", target, config="speculators")
    edit_config(draft, drop=("norm_before_residual", "fc_norm", "norm_output"))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble("eagle3-speculators", target=target, draft=draft)
    lines = [r.getMessage() for r in caplog.records if r.name == "draftsmith"]
    assert len(lines) == 1
    for what in ("aux layers", "[2, 4, 5]", "norm_before_residual", "fc_norm", "norm_output"):
        assert what in lines[0]
    assert "norm_before_fc" not in lines[0]  # stated by the config: no default taken


def test_mistral_fusion_linear_is_quantized_under_its_own_name_by_the_draft_spec_alone(target, tmp_path):
    """The FP8 eagle_linear (qscale_weight / qscale_act) loads with a quant line that names only the fusion linear;
    the layers stay in full precision and the target is untouched."""
    from draftsmith.components.quant import FP8, dequantize, quantize

    draft = write_mistral_eagle(tmp_path / "m", target)
    path = next(draft.glob("*.safetensors"))
    tensors = load_file(str(path))
    w8, scale = quantize(tensors["eagle_linear.weight"], "tensor")
    tensors |= {"eagle_linear.weight": w8, "eagle_linear.qscale_weight": scale,
                "eagle_linear.qscale_act": torch.ones(1)}
    from safetensors.torch import save_file
    save_file(tensors, str(path))
    spec = draftsmith.load_spec("eagle-mistral").model_dump(mode="json")
    spec["quant"] = {"method": "fp8", "scheme": "tensor", "modules": ["^fc$"]}
    model = draftsmith.assemble(draftsmith.parse_spec(spec), target=target, draft=draft, dtype="float64")
    fc = model.draft.fc
    assert fc._parameters["weight"].dtype == FP8
    torch.testing.assert_close(fc.weight, dequantize(w8, scale, "tensor", (128, 128)).double(), atol=0, rtol=0)
    assert model.draft.layers[0].self_attn.q_proj.weight.dtype == torch.float64
    assert all(p.dtype == torch.float64 for p in model.target.parameters())
    base = model.generate_baseline([2, 7, 1, 8], max_new_tokens=10, stop=[])
    assert model.generate([2, 7, 1, 8], max_new_tokens=10, stop=[]).token_ids == base.token_ids


def test_hidden_width_multiplier_widens_what_the_draft_reads(tmp_path):
    """hc_mult > 1 in the target's text config: the hidden states handed to the draft are hidden_size * hc_mult
    wide, so EAGLE-3's fc reads k of those, and an EAGLE-1-style draft of the plain width is refused."""
    from transformers import LlamaConfig

    from draftsmith.assembler.build import build_draft
    from draftsmith.assembler.config import draft_hf_config
    from draftsmith.components import backends

    registry = draftsmith.default_registry()
    raw = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
           "vocab_size": 96, "num_hidden_layers": 1}
    names = ["fc.weight", "layers.0.hidden_norm.weight", "layers.1.mlp.up_proj.weight"]
    for mult, width in ((None, 32), (1, 32), (3, 96)):
        target_cfg = LlamaConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=8, vocab_size=96,
                                 **({} if mult is None else {"hc_mult": mult}))
        model = build_draft(draftsmith.load_spec("eagle3-llama"), registry, draft_raw=raw,
                            draft_cfg=draft_hf_config(raw),
                            target_cfg=target_cfg, canonical_names=names, backend=backends.sdpa)
        assert model.fc.in_features == 3 * width and len(model.layers) == 2
        assert model.layers[0].self_attn.q_proj.in_features == 64 and model.layers[1].self_attn.q_proj.in_features == 32
        if mult == 3:
            with pytest.raises(draftsmith.SpecError, match=r"eagle1 needs the draft's hidden size \(32\) to equal "
                                                           r"the target's \(96\)"):
                build_draft(draftsmith.load_spec("eagle-mistral"), registry, draft_raw=raw,
                            draft_cfg=draft_hf_config(raw), target_cfg=target_cfg, canonical_names=names[2:],
                            backend=backends.sdpa)


def test_a_target_asking_for_hyper_connections_is_refused_before_decoding(tmp_path):
    """hc_mult > 1: draftsmith's target model keeps one residual stream, so it is refused at assemble, naming
    hc_mult (it assembled and then died in the draft's first matmul, an internal error). A target type once
    declared hyper_connections to pass, which assembled and died the same way: no layer computed them."""
    from draftsmith.components.targets import TargetArch, UnsupportedTarget

    target = write_target(tmp_path / "t", "llama", num_hidden_layers=8, hc_mult=2)
    draft = write_eagle3(tmp_path / "d", tmp_path / "t")
    with pytest.raises(UnsupportedTarget, match="hc_mult=2 asks for hyper-connections"):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert "hyper_connections" not in TargetArch.model_fields


def test_a_draft_narrower_than_its_target_embeds_with_its_own_table(tmp_path):
    """fc [H, k * Ht] with target_hidden_size Ht > H and the draft's own embed_tokens [V, H] (FORMATS.md): the family
    spec, which shares the target's embedding, is refused at assemble naming share.embed (it assembled and died in
    the draft's first norm); inspect proposes own_if_different, which decodes equal to the target alone."""
    from safetensors.torch import save_file

    target = write_target(tmp_path / "t", "llama", num_hidden_layers=8)                    # 64 wide
    narrow = write_target(tmp_path / "t32", "llama", num_hidden_layers=8, hidden_size=32, intermediate_size=64)
    draft = write_eagle3(tmp_path / "d", narrow, embed=True)                               # 32 wide, own embedding
    tensors = load_file(str(draft / "model.safetensors"))
    save_file(tensors | {"fc.weight": torch.randn(32, 3 * 64) * 0.05}, str(draft / "model.safetensors"))
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps(cfg | {"target_hidden_size": 64}))
    with pytest.raises(draftsmith.SpecError, match=r"draft.share.embed: target: the target's is 64 wide"):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    found = inspect_checkpoint(draft)
    assert found.spec["draft"]["share"]["embed"] == "own_if_different"
    model = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, dtype="float64")
    assert model.draft.embed_tokens.weight.shape == (cfg["vocab_size"], 32)
    for plan in (dict(topk=1, steps=4), dict(topk=4, steps=4, draft_tokens=10)):
        assert model.generate([[5, 6, 7], [1]], max_new_tokens=10, stop=[], **plan)[1].token_ids == \
            model.generate_baseline([[5, 6, 7], [1]], max_new_tokens=10, stop=[])[1].token_ids
    same = draftsmith.load_spec("eagle3-llama").model_dump(mode="json")
    same["draft"]["share"]["embed"] = "own_if_different"   # equal widths: the target's table, as 'target'
    shared = draftsmith.assemble(draftsmith.parse_spec(same), target=narrow, draft=write_eagle3(tmp_path / "e", narrow))
    assert not hasattr(shared.draft, "embed_tokens")
    # the spec inspect proposed (its ignore of embed_tokens removed) also loads a same-width draft shipping the usual
    # frozen copy of the target's table: own_if_different takes the target's, and the copy is not read (it was
    # refused as unexpected, so no one spec could load both widths)
    copy = write_eagle3(tmp_path / "f", narrow, embed=True)
    shared = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=narrow, draft=copy)
    assert not hasattr(shared.draft, "embed_tokens") and "embed_tokens.weight" not in shared.draft.state_dict()
    with pytest.raises(CheckpointMismatch, match="unexpected: 'embed_tokens.weight'"):
        draftsmith.assemble(draftsmith.parse_spec(same | {"name": "own", "draft": {**same["draft"], "share": {
            **same["draft"]["share"], "embed": "target"}}, "weights": {**same["weights"], "ignore": []}}),
            target=narrow, draft=copy)   # share.embed: target reads no copy the spec does not ignore, as before


def test_a_narrow_drafts_width_stated_by_target_hidden_size_is_no_pairing_note():
    from types import SimpleNamespace

    from draftsmith.assembler.explain import pairing_note

    target = SimpleNamespace(hidden_size=64, vocab_size=258)
    assert pairing_note({"hidden_size": 32, "target_hidden_size": 64}, target)() is None
    assert pairing_note({"hidden_size": 32, "eagle_config": {"target_hidden_size": 64}}, target)() is None
    assert "hidden_size 32 (the target's: 64)" in pairing_note({"hidden_size": 32}, target)()
    assert "hidden_size 32" in pairing_note({"hidden_size": 32, "target_hidden_size": 48}, target)()
