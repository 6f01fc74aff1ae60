"""`draftsmith convert --to eagle1-speculators`: EAGLE-1 / HASS in the older speculators layout (fusion_fc.*,
transformer.*, a speculators config whose fusion_bias and layernorms are read from the tensors). The round trip is
the identity bit for bit (invariant 22), a yuhuili EAGLE-1 draft converts into it and decodes the same tokens, and a
draft whose norms no layernorms flag can say is refused before anything is written."""
import json

import pytest
import torch

import draftsmith
from draftsmith.convert.canonical import ConvertError, read_canonical
from draftsmith.convert.run import convert
from draftsmith.testing import edit_config, write_eagle1, write_eagle1_speculators, write_target
from draftsmith.testing.mistral import write_mistral_eagle
from test_convert import fake_target, files_of, same_bits


@pytest.mark.parametrize("layernorms, fusion_bias", [(False, False), (False, True), (True, False), (True, True)])
def test_a_round_trip_is_bit_for_bit_and_says_its_flags(tmp_path, layernorms, fusion_bias):
    src = write_eagle1_speculators(tmp_path / "src", fake_target(tmp_path / "t"), layernorms=layernorms,
                                   fusion_bias=fusion_bias)
    config = convert(src, "eagle1-speculators", tmp_path / "out")
    assert same_bits(files_of(src), files_of(tmp_path / "out"))
    assert (config["fusion_bias"], config["layernorms"], config["speculators_model_type"]) == (
        fusion_bias, layernorms, "eagle")
    assert "bias" not in config and "bias" not in config["transformer_layer_config"]   # fusion_bias says it
    before, facts, _, family = read_canonical(src)
    after, facts_after, _, family_after = read_canonical(tmp_path / "out")
    assert same_bits(before, after) and family_after == family == "eagle1-speculators"


def test_a_yuhuili_draft_converts_and_decodes_the_same_tokens(tmp_path):
    target = write_target(tmp_path / "t", num_hidden_layers=4, seed=2)
    src = write_eagle1(tmp_path / "src", target, std=0.3, bias=True)
    config = convert(src, "eagle1-speculators", tmp_path / "out")
    assert (config["fusion_bias"], config["layernorms"]) == (True, False)
    assert "bias" not in config["transformer_layer_config"]   # the yuhuili config's `bias`: fusion_bias says it
    assert "fusion_fc.bias" in files_of(tmp_path / "out") and "fc.bias" not in files_of(tmp_path / "out")
    a = draftsmith.assemble("eagle1-llama", target=target, draft=src)
    b = draftsmith.assemble("eagle1-speculators", target=target, draft=tmp_path / "out")
    prompts = [[3, 1, 4, 1, 5, 9], [2, 6]]
    assert [o.token_ids for o in a.generate(prompts, max_new_tokens=10)] == \
        [o.token_ids for o in b.generate(prompts, max_new_tokens=10)]
    assert a.generate(prompts, max_new_tokens=10)[0].stats.accepted_per_position == \
        b.generate(prompts, max_new_tokens=10)[0].stats.accepted_per_position   # the very same draft


def test_norms_no_layernorms_flag_can_say_are_refused_before_writing(tmp_path):
    # one Mistral-native layer: layer 0's input norm and a final norm, but no embedding norm
    src = write_mistral_eagle(tmp_path / "m", fake_target(tmp_path / "t"), layers=1)
    with pytest.raises(ConvertError, match=r"holds fc\.embed_norm\.weight, .* all or none .* this draft holds "
                                           r"layers\.0\.input_layernorm\.weight, norm\.weight, not "
                                           r"fc\.embed_norm\.weight"):
        convert(src, "eagle1-speculators", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_eagle3_drafts_head_is_refused_without_a_layout_that_cannot_hold_the_draft(tmp_path):
    """An EAGLE-3 draft's own head: said as a head the draft carries, and no layout is proposed that would refuse
    the rest of the draft (eagle1-speculators holds an lm_head, but no hidden_norm or EAGLE-3 fc)."""
    from draftsmith.testing import write_eagle3

    src = write_eagle3(tmp_path / "src", fake_target(tmp_path / "t"))
    with pytest.raises(ConvertError) as info:
        convert(src, "mistral", tmp_path / "out")
    (line,) = [l.strip() for l in str(info.value).splitlines() if l.strip().startswith("lm_head.weight")]
    assert line.startswith("lm_head.weight is an output head the draft carries (an EAGLE-3 draft's own"), line
    assert "--to" not in line and line.endswith("load it as it is (--spec eagle3-llama)"), line


def test_an_eagle3_draft_cannot_become_an_eagle1_one(tmp_path):
    from draftsmith.testing import write_eagle3

    src = write_eagle3(tmp_path / "e", fake_target(tmp_path / "t"))
    with pytest.raises(ConvertError, match="cannot express"):
        convert(src, "eagle1-speculators", tmp_path / "out")
    assert json.loads((src / "config.json").read_text())   # the source untouched


def test_the_layer_architecture_is_the_sources_and_qkv_biases_are_refused(tmp_path):
    src = write_eagle1_speculators(tmp_path / "src", fake_target(tmp_path / "t"))
    edit_config(src, transformer_layer_architecture="MyDecoderLayer")
    assert convert(src, "eagle1-speculators", tmp_path / "out")["transformer_layer_architecture"] == "MyDecoderLayer"
    # q/k/v biases: speculators builds the layer from transformer_layer_config, whose Llama keys cannot say them
    from safetensors.torch import load_file, save_file

    biased = tmp_path / "biased"
    write_eagle1(biased, fake_target(tmp_path / "t"))
    tensors = load_file(biased / "model.safetensors")
    for p in "qkv":
        rows = tensors[f"layers.0.self_attn.{p}_proj.weight"].shape[0]
        tensors[f"layers.0.self_attn.{p}_proj.bias"] = torch.zeros(rows)
    save_file(tensors, biased / "model.safetensors", metadata={"format": "pt"})
    edit_config(biased, qkv_bias=True)
    with pytest.raises(ConvertError, match=r"cannot express .*q_proj\.bias"):
        convert(biased, "eagle1-speculators", tmp_path / "out2")
    assert not (tmp_path / "out2").exists()


# --- to the flat EAGLE layout: fc's bias stated, a frozen head copy left out, an embedding norm refused -----------

def eagle_reads_bias(config):
    """How the EAGLE reference reads a flat draft config (EaModel.__init__: con["bias"], else True)."""
    return config.get("bias", True)


@pytest.mark.parametrize("fusion_bias", [False, True])
def test_the_flat_layout_states_fc_bias_as_eagles_reference_reads_it(tmp_path, fusion_bias):
    target = write_target(tmp_path / "t", num_hidden_layers=4, seed=3)
    src = write_eagle1_speculators(tmp_path / "src", target, fusion_bias=fusion_bias, heads=False, std=0.3)
    config = convert(src, "layers", tmp_path / "out")
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written == config and written["bias"] is fusion_bias
    assert eagle_reads_bias(written) == ("fc.bias" in files_of(tmp_path / "out"))   # a bias-free fc stays bias-free
    assert "fusion_bias" not in written and "layernorms" not in written   # speculators' keys: `bias` says it here
    a = draftsmith.assemble("eagle1-speculators", target=target, draft=src)
    b = draftsmith.assemble("eagle1-llama", target=target, draft=tmp_path / "out")
    assert (b.draft.fc.bias is not None) is fusion_bias
    prompts = [[3, 1, 4, 1, 5, 9], [2, 6]]
    assert [o.token_ids for o in a.generate(prompts, max_new_tokens=10)] == \
        [o.token_ids for o in b.generate(prompts, max_new_tokens=10)]
    convert(tmp_path / "out", "eagle1-speculators", tmp_path / "back")   # and back: bit for bit, fusion_bias again
    assert same_bits(files_of(src), files_of(tmp_path / "back"))
    assert json.loads((tmp_path / "back" / "config.json").read_text())["fusion_bias"] is fusion_bias


def test_a_yuhuili_draft_without_a_bias_key_gets_one(tmp_path):
    """A Vicuna-style draft (no `bias` key, an fc.bias): the flat result says `bias: true` rather than leave it to a
    default readers disagree on (EAGLE's reference: true, SGLang's EAGLE-3 loader: false)."""
    src = write_eagle1(tmp_path / "src", fake_target(tmp_path / "t"), bias=True)
    edit_config(src, drop=["bias"])
    assert convert(src, "layers", tmp_path / "out")["bias"] is True


def test_a_frozen_lm_head_copy_is_left_out_of_the_flat_layout_with_a_note(tmp_path, caplog):
    """speculators' frozen lm_head copy: the eagle1-speculators spec ignores it (the target's head is used) and the
    flat EAGLE-1 layout has no place for it (EAGLE's strict load, the eagle1-llama spec refuse the name): left out,
    said; the embedding copy, which the flat layout holds, is carried; the source keeps both."""
    target = write_target(tmp_path / "t", num_hidden_layers=4, seed=3)
    src = write_eagle1_speculators(tmp_path / "src", target, heads=True, std=0.3)
    with caplog.at_level("WARNING", logger="draftsmith"):
        convert(src, "layers", tmp_path / "out")
    out = files_of(tmp_path / "out")
    assert "lm_head.weight" not in out and torch.equal(out["embed_tokens.weight"],
                                                       files_of(src)["embed_tokens.weight"])
    assert {"lm_head.weight", "embed_tokens.weight"} <= set(files_of(src))
    notes = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(notes) == 1 and "\n" not in notes[0], notes
    assert notes[0].startswith("note: 'lm_head.weight' left out of ") and "the source still holds it" in notes[0]
    assert "eagle1-llama, the spec that reads the layers result, would refuse it" in notes[0]
    a = draftsmith.assemble("eagle1-speculators", target=target, draft=src)
    b = draftsmith.assemble("eagle1-llama", target=target, draft=tmp_path / "out")
    prompts = [[3, 1, 4, 1, 5, 9], [2, 6]]
    assert [o.token_ids for o in a.generate(prompts, max_new_tokens=10)] == \
        [o.token_ids for o in b.generate(prompts, max_new_tokens=10)]


def test_the_embedding_norm_is_refused_from_the_flat_layout_in_one_line(tmp_path):
    """layernorms: fc.embed_norm has no flat name any reader reads: refused before a tensor is read, in one line
    that says what it is and where it can go (not the list of everything the flat result would read back wrong)."""
    src = write_eagle1_speculators(tmp_path / "src", fake_target(tmp_path / "t"), layernorms=True, heads=True)
    with pytest.raises(ConvertError) as info:
        convert(src, "layers", tmp_path / "out")
    head, *lines = str(info.value).splitlines()
    assert head.endswith("cannot be written as layers:") and len(lines) == 1, str(info.value)
    assert lines[0].strip().startswith("fc.embed_norm.weight is the embedding's norm before fc (speculators' "
                                       "embedding_layernorm"), lines
    assert lines[0].endswith("keep it in a layout that holds it (--to eagle1-speculators) or load it as it is "
                             "(--spec eagle1-speculators)"), lines
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fusion_bias, layernorms", [(False, False), (True, True)])
def test_what_mistral_has_no_name_for_is_refused_one_line_each_with_why(tmp_path, monkeypatch, fusion_bias,
                                                                        layernorms):
    """An eagle1-speculators draft carrying frozen embed / lm_head copies (and fc's bias, its embedding norm): each
    tensor Mistral's
    draft format has no name for is refused before a tensor is read, in one line saying what it is, why and where
    it can go, not listed again among the names the mistral layout cannot express."""
    import draftsmith.convert.canonical as canonical_mod

    src = write_eagle1_speculators(tmp_path / "src", fake_target(tmp_path / "t"), heads=True, fusion_bias=fusion_bias,
                                   layernorms=layernorms)
    monkeypatch.setattr(canonical_mod, "read_tensors", lambda *a, **k: pytest.fail("a tensor was read"))
    with pytest.raises(ConvertError) as info:
        convert(src, "mistral", tmp_path / "out")
    head, *lines = str(info.value).splitlines()
    assert head.endswith("cannot be written as mistral:") and "cannot express" not in str(info.value), head
    needs = [line.strip() for line in lines if line.strip().startswith("no tensor matches")]
    assert needs == ([] if layernorms else [   # Mistral's EAGLE norms each layer's input and what it feeds back
        "no tensor matches ^layers\\.0\\.input_layernorm\\.weight$ (a regex), which the mistral layout's family "
        "needs", "no tensor matches ^norm\\.weight$ (a regex), which the mistral layout's family needs"]), lines
    lines = [line for line in lines if not line.strip().startswith("no tensor matches")]
    why = {line.strip().split(" ", 1)[0]: line.strip() for line in lines}
    assert len(why) == len(lines) and list(why) == ["fc.bias"] * fusion_bias + ["fc.embed_norm.weight"] * layernorms + [
        "embed_tokens.weight", "lm_head.weight"], lines
    assert why["lm_head.weight"].startswith("lm_head.weight is an output head the draft carries"), lines
    assert "Mistral's draft format has no name for (no output in a draft" in why["lm_head.weight"], lines
    assert "no tok_embeddings in a draft" in why["embed_tokens.weight"], lines
    assert not fusion_bias or "which Mistral's eagle_linear has none of" in why["fc.bias"], lines
    assert not layernorms or "speculators' embedding_layernorm" in why["fc.embed_norm.weight"], lines
    for line in why.values():
        assert line.endswith("keep it in a layout that holds it (--to eagle1-speculators) or load it as it is "
                             "(--spec eagle1-speculators)"), line
    assert not (tmp_path / "out").exists()
