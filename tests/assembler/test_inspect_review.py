"""`draftsmith inspect` after a review (2026-11-27, fixtures like /tmp/review_ckpt): a Hugging-Face-named GQA draft is
not read as Mistral without Mistral evidence (its rotary order is the config's rope_interleave, else transformers'
default, said); unknown layouts rank the families by every detection row, config keys included, names a family
merely ignores not fitting, with a note for a whole model; the spec proposed for real FP8 layouts (static
activation scales, Mistral's qscale names on every linear, scales on some modules only) loads, and a 0-d scale is
said; unread keys inside eagle_config are reported."""
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.detect import detect_builtin_layout, missing_required
from draftsmith.assembler.fit import closest_families
from draftsmith.components.quant import dequantize, quantize
from draftsmith.convert.fits import proposed_fit
from draftsmith.convert.inspect import inspect_checkpoint, render_unknown
from draftsmith.convert.run import convert
from draftsmith.testing import write_eagle1, write_eagle3, write_self_draft, write_target
from draftsmith.testing.mistral import write_mistral_eagle
from draftsmith.testing.quant import dequantized_copy, quantize_folder

SIZES = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
             num_hidden_layers=8, vocab_size=64)
H = SIZES["hidden_size"]


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_target(tmp_path_factory.mktemp("review-target"), "llama", seed=3, **SIZES)


def notes(found) -> list[str]:
    return list(found.match.assumptions)


def draft_out(model, seed: int = 0):
    """The draft's output, fed-back state and logits for a fixed input (float64)."""
    ids, pos = torch.tensor([[3, 9, 4, 1, 7]]), torch.arange(5)[None]
    hidden = torch.randn(1, 5, H, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out, feed = model.draft(ids, hidden, pos, embed=model.draft_embed, from_target=True)
        return out, feed, model.draft.logits(out, model.draft_head)


# --- 1. Hugging Face names are no Mistral evidence --------------------------------------------------------------------

def test_a_hf_named_gqa_draft_with_no_rope_key_is_read_neox_and_both_orders_it_assumes_are_said(tmp_path):
    """testing.write_self_draft: fc, the target's own layers (input norms) and final norm in plain HF names, no
    rope_interleave key. It was proposed rope: interleaved and post_norm as Mistral-native, with no note."""
    t = write_target(tmp_path / "t", "llama", seed=5, **(SIZES | {"num_hidden_layers": 2}))
    found = inspect_checkpoint(write_self_draft(tmp_path / "d", t))
    assert found.match.spec == "eagle-mistral" and "Mistral-native" not in found.match.reason
    assert found.spec["draft"]["attention"]["rope"] == "neox"
    said = notes(found)
    assert any(n.startswith("attention.rope: neox (assumed") for n in said), said
    assert any(n.startswith("feed_back: post_norm (assumed") for n in said), said
    draftsmith.assemble(draftsmith.parse_spec(found.spec), target=t, dtype="float64")


def test_a_converted_mistral_draft_whose_rope_key_was_lost_loads_as_its_native_original(target, tmp_path):
    """`convert --to layers` permutes Mistral's q/k rows to neox and says rope_interleave: false; with that key
    deleted the HF names alone must not bring back the interleaved reading (a different draft)."""
    native_dir = write_mistral_eagle(tmp_path / "m", target)
    convert(native_dir, "layers", tmp_path / "hf")
    cfg = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert cfg.pop("rope_interleave") is False
    (tmp_path / "hf" / "config.json").write_text(json.dumps(cfg))
    found = inspect_checkpoint(tmp_path / "hf")
    assert found.spec["draft"]["attention"]["rope"] == "neox"
    assert any(n.startswith("attention.rope: neox (assumed") for n in notes(found))
    native = draftsmith.assemble("eagle-mistral", target=target, draft=native_dir, dtype="float64")
    hf = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, dtype="float64")
    for a, b in zip(draft_out(native), draft_out(hf)):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


def test_the_rope_key_convert_writes_is_the_evidence_read_and_native_names_stay_interleaved(target, tmp_path):
    """With its rope_interleave key the converted draft is the Mistral EAGLE in HF names (the order read from the key,
    the post-norm feedback said); Mistral's own names and params.json keep the interleaved reading."""
    native_dir = write_mistral_eagle(tmp_path / "m", target)
    convert(native_dir, "layers", tmp_path / "hf")
    found = inspect_checkpoint(tmp_path / "hf")
    assert "Mistral-native" in found.match.reason and found.spec["draft"]["attention"]["rope"] == "neox"
    assert "attention.rope: neox (the config's rope_interleave)" in notes(found)
    assert not any("(assumed: q/k rows" in n for n in notes(found))
    assert found.spec["draft"]["feed_back"] == "post_norm"
    native = inspect_checkpoint(native_dir)
    assert native.spec["draft"]["attention"]["rope"] == "interleaved"


def test_detection_alone_says_the_hf_rows_assumptions():
    names = ["fc.weight", "norm.weight", *(f"layers.{i}.{n}.weight" for i in range(2) for n in (
        "input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "mlp.up_proj"))]
    bare = detect_builtin_layout({"hidden_size": 8}, names)
    keyed = detect_builtin_layout({"hidden_size": 8, "rope_interleave": False}, names)
    assert bare.spec == keyed.spec == "eagle-mistral" and bare.reason != keyed.reason
    assert any(n.startswith("attention.rope: neox (assumed") for n in bare.assumptions)
    assert not any(n.startswith("attention.rope") for n in keyed.assumptions)   # inspect reads the key


# --- 2. the closest families of an unknown layout --------------------------------------------------------------------

def renamed(src: Path, dst: Path, old: str, new: str) -> Path:
    shutil.copytree(src, dst)
    path = dst / "model.safetensors"
    save_safetensors({k.replace(old, new): v for k, v in load_file(str(path)).items()}, dst)
    return dst


def test_a_multi_layer_eagle3_with_its_hidden_norm_renamed_is_closest_to_eagle3_llama(target, tmp_path):
    """Was: eagle1-llama (98% fit, 'missing: none') with eagle3-llama last: only the NeMo row of eagle3-llama was
    scored, eagle1-llama's forbidden input_layernorm was not, and its lm_head / d2t / norm counted as fitting."""
    src = write_eagle3(tmp_path / "e3L", target, draft_vocab=48, layout="layers", layers=2)
    found = inspect_checkpoint(renamed(src, tmp_path / "u", "layers.0.hidden_norm", "layers.0.hnorm"))
    (first, score, bad), (second, _, _) = closest_families(found.config, list(found.infos))
    assert first == "eagle3-llama" and bad == ["layers.0.hnorm.weight"] and second != "eagle1-llama"
    assert missing_required(first, list(found.infos), found.config) == ["layers.0.hidden_norm.weight"]


def test_a_midlayer_draft_with_a_flat_config_is_closest_to_eagle3_llama_not_the_speculators_family(target, tmp_path):
    """Was: eagle3-speculators first, though the config has none of its keys (config_any was not scored)."""
    src = write_eagle3(tmp_path / "e3", target, draft_vocab=48)
    found = inspect_checkpoint(renamed(src, tmp_path / "u", "midlayer.hidden_norm", "midlayer.hidden_layernorm"))
    ranked = closest_families(found.config, list(found.infos), n=12)
    assert ranked[0][0] == "eagle3-llama"
    assert dict((s, x) for s, x, _ in ranked)["eagle3-speculators"] < ranked[0][1]
    text = render_unknown(found)
    assert "config keys it needs (one of): speculators_config" in text.splitlines()[2]


def test_a_whole_model_is_said_and_a_family_that_ignores_every_name_does_not_fit(target):
    """`inspect TARGET` proposed deepseek-mtp (50% fit, 'names that did not fit: none'): its rules ignore every
    tensor of a target without MTP layers, which counted as fitting."""
    found = inspect_checkpoint(target)
    assert found.match is None
    ranked = dict((s, x) for s, x, _ in closest_families(found.config, list(found.infos), n=12))
    assert ranked.get("deepseek-mtp", 0) < 0.05   # a family scoring 0 is not offered at all
    text = render_unknown(found)
    assert "closest: deepseek-mtp" not in text
    assert text.splitlines()[-1] == (f"note: {target} looks like a whole model (model.embed_tokens, model.layers.*), "
                                     "not a draft: is it the target? `draftsmith inspect` reads a draft checkpoint")
    assert "looks like a whole model" not in render_unknown(found, whole_model=False)


def test_missing_tensors_are_written_as_names_not_regex_remains():
    """The FP8 row's `\\S+` showed as 'S+' and its optional group as '(_inv)?'."""
    assert missing_required("eagle1-llama-fp8", ["fc.weight", "layers.0.post_attention_layernorm.weight"]) == [
        "layers.N.*.weight_scale[_inv]"]


def test_a_forbidden_tensor_or_config_key_lowers_a_rows_score():
    from draftsmith.assembler.detect import FAMILIES, condition_share

    speculators = next(f for f in FAMILIES if f.spec == "eagle3-speculators")
    names = ["fc.weight", "layers.0.hidden_norm.weight"]
    assert condition_share(speculators, {"speculators_config": {}}, names) == 1.0
    assert condition_share(speculators, {}, names) == pytest.approx(2 / 3)
    eagle1 = next(f for f in FAMILIES if f.spec == "eagle1-llama")
    plain = ["fc.weight", "layers.0.post_attention_layernorm.weight"]
    assert condition_share(eagle1, {}, plain) == 1.0
    assert condition_share(eagle1, {}, plain + ["layers.0.input_layernorm.weight"]) == 0.5


# --- 3. the spec proposed for FP8 layouts loads ----------------------------------------------------------------------

def assert_loads_as(found, target, reference: Path, float_spec: str,
                    modules=("self_attn.q_proj", "mlp.down_proj")):
    """The proposed spec leaves no tensor unplaced and loads weights equal to the float reference copy's."""
    fit = proposed_fit(found)
    assert fit is not None and fit.misfits == {}, fit
    model = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, dtype="float64")
    ref = draftsmith.assemble(float_spec, target=target, draft=reference, dtype="float64")
    for name in modules:
        mine, want = (m.draft.layers[0].get_submodule(name).weight for m in (model, ref))
        assert torch.equal(mine, want), name
    return model


def test_static_activation_scales_are_ignored_said_and_the_proposed_spec_loads(target, tmp_path):
    """input_scale beside per-tensor weight scales (compressed-tensors static): the proposed spec had
    activation: none and failed on 7 unexpected input_scale tensors."""
    draft = write_eagle1(tmp_path / "d", target, bias=False)
    quantize_folder(draft, r"^layers\.", scheme="tensor")
    reference = dequantized_copy(draft, tmp_path / "float", scheme="tensor")
    tensors = load_file(str(draft / "model.safetensors"))
    tensors |= {k.replace("weight_scale", "input_scale"): torch.ones(1) for k in list(tensors)
                if k.endswith("weight_scale")}
    save_safetensors(tensors, draft)
    found = inspect_checkpoint(draft)
    assert found.match.spec == "eagle1-llama-fp8" and found.spec["quant"]["scheme"] == "tensor"
    assert any(n.startswith("weights.ignore: the 7 static activation scale(s) (input_scale)") for n in notes(found))
    assert_loads_as(found, target, reference, "eagle1-llama")


def test_scales_on_some_modules_only_are_quantized_where_they_are(target, tmp_path):
    """eagle1-llama-fp8's modules ('^layers\\.\\d+\\.') take every layer linear: a draft that quantized its MLP only
    was proposed them all, and missed the attention scales."""
    draft = write_eagle1(tmp_path / "d", target, bias=False)
    quantize_folder(draft, r"^layers\.\d+\.mlp\.", scheme="block", block=(32, 32), quantization_config=True)
    reference = dequantized_copy(draft, tmp_path / "float", scheme="block", block=(32, 32))
    found = inspect_checkpoint(draft)
    assert found.match.spec == "eagle1-llama-fp8"
    assert sorted(found.spec["quant"]["modules"]) == [rf"^layers\.\d+\.mlp\.{p}_proj$" for p in ("down", "gate", "up")]
    assert_loads_as(found, target, reference, "eagle1-llama")


def test_mistral_scales_on_every_linear_load_through_rules_the_proposal_adds(target, tmp_path):
    """qscale_weight / qscale_act on the layer linears as well as eagle_linear: the proposal said fp8 on '^fc$'
    only and failed with 14 unexpected tensors."""
    draft = write_mistral_eagle(tmp_path / "m", target)
    reference = Path(shutil.copytree(draft, tmp_path / "float"))   # the dequantized values under the same names
    tensors = load_file(str(draft / "consolidated.safetensors"))
    stored, dequantized = dict(tensors), dict(tensors)
    for name, t in tensors.items():
        if name.endswith(".weight") and t.dim() == 2:
            w, s = quantize(t, "tensor")
            base = name.removesuffix("weight")
            stored |= {name: w, base + "qscale_weight": s, base + "qscale_act": torch.tensor([0.5])}
            dequantized[name] = dequantize(w, s, "tensor", (128, 128))
    save_safetensors(stored, draft, "consolidated.safetensors")
    save_safetensors(dequantized, reference, "consolidated.safetensors")
    found = inspect_checkpoint(draft)
    assert found.match.spec == "eagle-mistral"
    assert len(found.spec["quant"]["modules"]) == 8   # fc and the 7 linears of every layer
    said = notes(found)
    assert not any(n.startswith("weights.rules:") for n in said), said   # eagle-mistral's own rules read them
    assert any(n.startswith("weights.ignore: the 14 static activation scale(s) (qscale_act)") for n in said), said
    model = assert_loads_as(found, target, reference, "eagle-mistral")
    ref = draftsmith.assemble("eagle-mistral", target=target, draft=reference, dtype="float64")
    for a, b in zip(draft_out(model), draft_out(ref)):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


def test_a_0d_weight_scale_is_noted_as_the_per_tensor_scale_it_equals(target, tmp_path):
    """AutoFP8 stores a per-tensor scale 0-d; the fp8 method loads it as the [1] it equals
    (tests/components/test_fp8_scalar_scale.py): the proposal says how it reads them."""
    draft = write_eagle1(tmp_path / "d", target, bias=False)
    quantize_folder(draft, r"^layers\.", scheme="tensor")
    tensors = load_file(str(draft / "model.safetensors"))
    save_safetensors({k: v.reshape(()) if k.endswith("weight_scale") else v for k, v in tensors.items()}, draft)
    found = inspect_checkpoint(draft)
    assert any(n.startswith("quant: 7 weight_scale tensor(s) are stored 0-d") for n in notes(found)), notes(found)


# --- 4. unread keys inside eagle_config ------------------------------------------------------------------------------

def test_unread_eagle_config_keys_are_reported_and_the_read_ones_are_not(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target, aux_ids=[1, 3, 5])
    cfg = json.loads((draft / "config.json").read_text())
    cfg["eagle_config"] |= {"use_last_layernorm": True, "use_input_layernorm_in_first_layer": False,
                            "use_mtp_layernorm": False, "parallel_draft_step": 1, "norm_before_residual": False}
    (draft / "config.json").write_text(json.dumps(cfg))
    found = inspect_checkpoint(draft)
    assert found.unread == ()   # Model-Optimizer's flags are read: honoured or refused (test_eagle3_modelopt_flags)


def test_rope_scaling_is_not_said_unread(target, tmp_path):
    """The older name of rope_parameters (a Llama-3.1 draft's config): read (transformers maps it, MLA reads it), so
    not among the keys no component reads (inspect said it was, while the draft's rotary used it)."""
    draft = write_eagle3(tmp_path / "d", target, aux_ids=[1, 3, 5])
    cfg = json.loads((draft / "config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}
    (draft / "config.json").write_text(json.dumps(cfg))
    assert "rope_scaling" not in inspect_checkpoint(draft).unread


def test_per_head_q_and_k_norms_are_read_into_the_proposed_spec(tmp_path):
    # a draft holding self_attn.q_norm / k_norm got a spec without qk_norm, which refused them as unexpected
    import torch
    from safetensors.torch import load_file, save_file

    import draftsmith
    from draftsmith.convert.inspect import inspect_checkpoint
    from draftsmith.specs.loader import parse_spec
    from draftsmith.testing import write_eagle3, write_target

    t = write_target(tmp_path / "t", hidden_size=64, intermediate_size=128, num_attention_heads=4,
                     num_key_value_heads=2, num_hidden_layers=8, vocab_size=96, max_position_embeddings=128)
    d = write_eagle3(tmp_path / "d", t)
    plain = inspect_checkpoint(d)
    assert "qk_norm" not in plain.spec["draft"]["attention"]
    tensors = load_file(str(d / "model.safetensors"))
    tensors["midlayer.self_attn.q_norm.weight"] = torch.rand(16) + 0.5
    tensors["midlayer.self_attn.k_norm.weight"] = torch.rand(16) + 0.5
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    found = inspect_checkpoint(d)
    assert found.spec["draft"]["attention"]["qk_norm"] is True
    assert any("qk_norm: true" in note for note in found.match.assumptions)
    model = draftsmith.assemble(parse_spec(found.spec), target=t, draft=d)
    assert torch.equal(model.draft.layers[0].self_attn.q_norm.weight, tensors["midlayer.self_attn.q_norm.weight"])
    # the family spec (no qk_norm) refuses them, and the error names the field that reads them
    from draftsmith.assembler.plan import CheckpointMismatch

    with pytest.raises(CheckpointMismatch) as e:
        draftsmith.assemble("eagle3-llama", target=t, draft=d)
    assert "note: the checkpoint holds per-head q/k norms ('layers.0.self_attn.k_norm.weight', " \
           "'layers.0.self_attn.q_norm.weight') and the draft's attention is built without them: state " \
           "draft.attention.qk_norm: true" in e.value.__notes__, e.value
    with_norms = found.spec | {"checkpoints": {**found.spec["checkpoints"], "draft": str(write_eagle3(tmp_path / "p",
                                                                                                     t))}}
    with pytest.raises(CheckpointMismatch) as e:   # the reverse: the spec asks for them, the checkpoint has none
        draftsmith.assemble(parse_spec(with_norms), target=t)
    assert any("state draft.attention.qk_norm: false" in n for n in e.value.__notes__), e.value
    renamed = tmp_path / "r"   # the norms under another name: a rule is missing, the field is right
    renamed.mkdir()
    (renamed / "config.json").write_text((d / "config.json").read_text())
    save_file({k.replace("_norm.", "_layernorm."): v for k, v in tensors.items()}, str(renamed / "model.safetensors"))
    with pytest.raises(CheckpointMismatch) as e:
        draftsmith.assemble(parse_spec(found.spec | {"checkpoints": {**found.spec["checkpoints"],
                                                                     "draft": str(renamed)}}), target=t)
    assert "q_layernorm" in str(e.value) and not any("qk_norm" in n for n in getattr(e.value, "__notes__", ()))


def test_block_scales_a_float_family_does_not_hold_are_proposed_with_per_group_inputs(target, tmp_path):
    """An EAGLE-3 draft whose layer is block FP8 (its family spec says quant: none): the proposal quantizes its
    inputs per token and group of block[1] channels (activation: dynamic), as every engine runs a block fp8 linear,
    says so, and its weights load as the float copy's."""
    draft = write_eagle3(tmp_path / "d", target)
    quantize_folder(draft, r"^midlayer\.", scheme="block", block=(16, 16))
    reference = dequantized_copy(draft, tmp_path / "float", scheme="block", block=(16, 16))
    found = inspect_checkpoint(draft)
    quant = found.spec["quant"]
    assert (quant["method"], quant["scheme"], quant["activation"]) == ("fp8", "block", "dynamic")
    assert any(n.startswith("quant: fp8 on ") and "activation: dynamic" in n for n in notes(found)), notes(found)
    model = assert_loads_as(found, target, reference, "eagle3-llama")
    assert model.draft.layers[0].self_attn.q_proj.activation == "dynamic"


def test_block_scales_whose_block_does_not_divide_the_inputs_are_proposed_with_full_precision_inputs(target,
                                                                                                      tmp_path):
    """128 x 128 blocks over 32- and 64-wide weights (one scale each, so the shapes allow any block from 64 up and
    128 is guessed): 128 does not divide the inputs, which a per-group input quantizer (and every engine) refuses,
    so the proposal keeps full-precision inputs, says why, and loads."""
    draft = write_eagle3(tmp_path / "d", target)
    quantize_folder(draft, r"^midlayer\.", scheme="block", block=(128, 128))
    reference = dequantized_copy(draft, tmp_path / "float", scheme="block", block=(128, 128))
    found = inspect_checkpoint(draft)
    assert (found.spec["quant"]["block"], found.spec["quant"]["activation"]) == ([128, 128], "none")
    assert any(n.startswith("quant.activation: none (full-precision inputs): block[1] = 128 does not divide the "
                            "input width of ") for n in notes(found)), notes(found)
    assert_loads_as(found, target, reference, "eagle3-llama")
