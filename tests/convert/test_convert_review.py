"""What a review of `draftsmith convert` reproduced (fixtures: draftsmith.testing writers, as /tmp/review_ckpt/mk.py):

A. a change of rotary pair order permuted only q/k_proj weight and bias rows: their FP8 scales (per channel, per
   block) and the q_norm / k_norm vectors were left in the old order, and verify compared against the same
   permuted dict, so a draft computing something else was written with exit 0;
B. an MTP folder (a target's own layer) was read with the target's tensors carried along, one of them over the
   draft's own lm_head, and refused with an unrelated message;
C. the name-only checks ran after every tensor had been read;
D. the last line named a family spec that cannot load what was written (an FP8 draft, a narrow draft);
E. an unknown --to exited 1 (a bad option value exits 2);
F. config keys were dropped or rewritten: a Mistral `quantization` block, an MLA draft's model_type / architectures.
"""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.components.quant import dequantize, quantize
from draftsmith.convert.canonical import ConvertError, read_canonical
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.convert.run import convert
from draftsmith.doctor import draft_loss
from draftsmith.errors import OptionError
from draftsmith.testing import edit_config, write_eagle1, write_eagle3, write_target
from draftsmith.testing.mistral import write_mistral_eagle
from draftsmith.testing.mla import write_mla_eagle
from draftsmith.testing.quant import quantize_folder

HD = 16   # the writers' head_dim (write_target's defaults: hidden 64, 4 heads)
QK = ("layers.0.self_attn.q_proj", "layers.0.self_attn.k_proj")


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("t") / "t")


def weights(folder):
    (f,) = folder.glob("*.safetensors")
    return load_file(str(f))


def rewrite(folder, edit):
    (f,) = folder.glob("*.safetensors")
    save_file(edit(load_file(str(f))), str(f), metadata={"format": "pt"})


def to_neox(t, hd=HD):
    """Interleaved pairs (2i, 2i+1) -> neox pairs (i, i + d/2) within each head, by the definition of the two orders
    (slices, not convert's index table)."""
    heads = t.reshape(-1, hd, *t.shape[1:])
    return torch.cat([heads[:, 0::2], heads[:, 1::2]], 1).reshape(t.shape)


def dequant(tensors, module, block=None):
    w = tensors[f"{module}.weight"]
    if f"{module}.weight_scale_inv" in tensors:
        return dequantize(w, tensors[f"{module}.weight_scale_inv"], "block", block)
    if f"{module}.weight_scale" in tensors:
        return dequantize(w, tensors[f"{module}.weight_scale"], "channel", (1, 1))
    return w


def models(target, *folders, edit=None):
    """Each folder assembled (float64) with the spec inspect proposes for it; ``edit`` changes that spec first."""
    out = []
    for folder in folders:
        spec = inspect_checkpoint(folder).spec
        if edit:
            edit(spec)
        out.append(draftsmith.assemble(draftsmith.parse_spec(spec), target=target, draft=folder, dtype="float64"))
    return out


def same_function(target, src, out, edit=None):
    before, after = models(target, src, out, edit=edit)
    ids = [list(range(3, 40))]
    torch.testing.assert_close(draft_loss(after, ids, 2), draft_loss(before, ids, 2), rtol=1e-9, atol=1e-12)
    kw = dict(max_new_tokens=10, stop=[])
    a, b = before.generate([5, 6, 7, 8], **kw), after.generate([5, 6, 7, 8], **kw)
    assert a.token_ids == b.token_ids and a.stats.accepted_per_position == b.stats.accepted_per_position


def interleaved_eagle1(folder, target, scheme=None, block=(128, 128)):
    src = write_eagle1(folder, target)
    if scheme:
        quantize_folder(src, r"^layers\.", scheme=scheme, block=block)
    edit_config(src, rope_interleave=True)
    return src


# --- A. everything on the rotated rows follows them ------------------------------------------------------------------

def test_a_per_channel_fp8_drafts_scales_follow_its_rows(target, tmp_path):
    src = interleaved_eagle1(tmp_path / "src", target, "channel")
    convert(src, "layers", tmp_path / "out")
    a, b = weights(src), weights(tmp_path / "out")
    for module in QK:
        assert torch.equal(dequant(b, module), to_neox(dequant(a, module)))
    assert inspect_checkpoint(tmp_path / "out").spec["draft"]["attention"]["rope"] == "neox"
    same_function(target, src, tmp_path / "out")


def test_q_and_k_norm_vectors_follow_the_rows_they_scale(target, tmp_path):
    """draftsmith norms each head of q and k (components/attention.py) before the rotation: the norm's weight is
    per rotary dim, so it takes the rows' new order."""
    src = interleaved_eagle1(tmp_path / "src", target)
    g = torch.Generator().manual_seed(4)
    rewrite(src, lambda t: t | {f"layers.0.self_attn.{p}_norm.weight": 1 + torch.rand(HD, generator=g)
                                for p in "qk"})
    convert(src, "layers", tmp_path / "out")
    a, b = weights(src), weights(tmp_path / "out")
    for p in "qk":
        name = f"layers.0.self_attn.{p}_norm.weight"
        assert torch.equal(b[name], to_neox(a[name]))
    same_function(target, src, tmp_path / "out", edit=lambda s: s["draft"]["attention"].update(qk_norm=True))


def test_block_scales_inside_one_head_are_kept_where_each_block_holds_whole_heads(target, tmp_path):
    """32-row blocks over 16-row heads: the rows move within their block, whose scale is unchanged."""
    src = interleaved_eagle1(tmp_path / "src", target, "block", block=(32, 32))
    convert(src, "layers", tmp_path / "out")
    a, b = weights(src), weights(tmp_path / "out")
    for module in QK:
        assert torch.equal(b[f"{module}.weight_scale_inv"], a[f"{module}.weight_scale_inv"])
        assert torch.equal(dequant(b, module, (32, 32)), to_neox(dequant(a, module, (32, 32))))
    same_function(target, src, tmp_path / "out")


def test_block_scales_a_row_permutation_cannot_keep_are_refused_naming_the_tensor(target, tmp_path):
    """8-row blocks inside a 16-row head: the even rows of both blocks become the first block, so unless both blocks
    hold the same scales no block scale can say it; refused, nothing written."""
    src = interleaved_eagle1(tmp_path / "src", target, "block", block=(8, 8))
    with pytest.raises(ConvertError, match=r"layers\.0\.self_attn\.q_proj\.weight_scale_inv") as info:
        convert(src, "layers", tmp_path / "out")
    assert "8-row" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_block_scales_that_agree_across_the_blocks_a_head_mixes_are_exact(target, tmp_path):
    src = interleaved_eagle1(tmp_path / "src", target, "block", block=(8, 8))

    def same_pairs(t):   # the two 8-row blocks of each 16-row head take one scale (the larger: nothing clips)
        for module in QK:
            w, s = dequant(t, module, (8, 8)), t[f"{module}.weight_scale_inv"]
            paired = s.view(-1, 2, s.shape[1]).amax(1, keepdim=True).expand(-1, 2, -1).reshape(s.shape)
            full = paired.repeat_interleave(8, 0).repeat_interleave(8, 1)[:w.shape[0], :w.shape[1]]
            t[f"{module}.weight"], t[f"{module}.weight_scale_inv"] = (w / full).to(torch.float8_e4m3fn), paired
        return t

    rewrite(src, same_pairs)
    convert(src, "layers", tmp_path / "out")
    a, b = weights(src), weights(tmp_path / "out")
    for module in QK:
        assert torch.equal(dequant(b, module, (8, 8)), to_neox(dequant(a, module, (8, 8))))
    same_function(target, src, tmp_path / "out")


def test_a_tensor_on_the_rotated_rows_convert_does_not_know_is_refused(target, tmp_path):
    src = interleaved_eagle1(tmp_path / "src", target)
    rewrite(src, lambda t: t | {"layers.0.self_attn.q_proj.weight_zero_point": torch.zeros(64, 1)})
    with pytest.raises(ConvertError, match=r"q_proj\.weight_zero_point"):
        convert(src, "layers", tmp_path / "out")


def test_verify_checks_the_rows_against_an_expectation_of_its_own(target, tmp_path, monkeypatch):
    """A wrong row order computed once and used for both the writing and the comparison passed verify; it now
    compares each rotated tensor (dequantized) with the source's, reordered by the definition of the two orders."""
    import draftsmith.convert.run as run_mod

    src = interleaved_eagle1(tmp_path / "src", target, "channel")
    monkeypatch.setattr(run_mod, "rope_permutation", lambda d, s, t: torch.arange(d).flip(0))
    with pytest.raises(ConvertError, match=r"q_proj"):
        convert(src, "layers", tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- B. a family convert cannot write, and a carried tensor over the draft's own ------------------------------------

@pytest.fixture
def mtp(tmp_path):
    from draftsmith.testing.mtp import write_mtp

    folder = write_target(tmp_path / "mtp")
    write_mtp(folder)
    return folder


def test_an_mtp_folder_is_refused_up_front_naming_what_it_is(mtp, tmp_path, monkeypatch):
    import draftsmith.convert.canonical as canonical_mod

    monkeypatch.setattr(canonical_mod, "read_tensors", lambda *a, **k: pytest.fail("read a tensor"))
    res = CliRunner().invoke(app, ["convert", str(mtp), "--to", "layers", str(tmp_path / "out")])
    assert res.exit_code == 1, res.output
    assert "deepseek-mtp" in res.stderr and "mtp" in res.stderr and "would read back" not in res.stderr
    assert not (tmp_path / "out").exists()


def test_a_carried_tensor_never_takes_the_place_of_the_drafts_own(mtp):
    """The target's lm_head.weight is ignored by the MTP rules and its canonical name is its own, the name the
    draft's shared_head.head takes: it was written over the draft's head."""
    with pytest.raises(ConvertError, match=r"lm_head\.weight"):
        read_canonical(mtp)


# --- C. what the names and shapes refuse is refused before a tensor is read -----------------------------------------

@pytest.mark.parametrize(("write", "to", "why"), [
    (lambda d, t: write_eagle3(d, t, layout="layers", layers=2), "midlayer", "at most 1"),
    (lambda d, t: write_eagle3(d, t), "mistral", "cannot express"),
    (lambda d, t: write_mistral_eagle(d, t), "speculators", "hidden_norm"),
])
def test_name_checks_come_before_a_tensor_is_read(target, tmp_path, monkeypatch, write, to, why):
    import draftsmith.convert.canonical as canonical_mod

    src = write(tmp_path / "src", target)

    def no_reading(*a, **k):
        raise AssertionError("a tensor was read before the name checks")

    monkeypatch.setattr(canonical_mod, "read_tensors", no_reading)
    with pytest.raises(ConvertError, match=why):
        convert(src, to, tmp_path / "out")


# --- D. the last line says what loads the result ---------------------------------------------------------------------

def last_line(result):
    return next(line for line in result.output.splitlines() if line.startswith("# "))


def test_an_fp8_drafts_line_does_not_name_a_spec_that_reads_other_scales(target, tmp_path):
    src = write_eagle1(tmp_path / "src", target)
    quantize_folder(src, r"^layers\.", scheme="channel")
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    line = last_line(res)
    assert "load it with spec" not in line and "omit --spec" in line and "quant" in line, line
    assert "description" not in line, line   # inspect's description names what it read: no difference of builds
    assert f"draftsmith inspect {tmp_path / 'out'}" in line
    gen = CliRunner().invoke(app, ["generate", "--target", str(target), "--draft", str(tmp_path / "out"),
                                   "--token-ids", "1,2", "--max-new-tokens", "3", "--no-compare"])
    assert gen.exit_code == 0, gen.output


def test_a_narrow_drafts_line_does_not_name_the_bare_family(target, tmp_path):
    fake = tmp_path / "fake"
    fake.mkdir()
    tc = json.loads((target / "config.json").read_text())
    tc.update(hidden_size=32, num_attention_heads=2, num_key_value_heads=1, head_dim=16, intermediate_size=64)
    (fake / "config.json").write_text(json.dumps(tc))
    src = write_eagle3(tmp_path / "n", fake, draft_vocab=48, embed=True, aux_ids=[1, 3, 5])
    rewrite(src, lambda t: t | {"fc.weight": torch.randn(32, 3 * 64) * 0.05})
    edit_config(src, target_hidden_size=64)
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    line = last_line(res)
    assert "load it with spec" not in line and "omit --spec" in line and "share.embed" in line, line


def test_a_line_never_names_a_spec_that_refuses_what_was_written(target, tmp_path):
    """q_norm / k_norm: the family spec alone refuses them; detection reads them (qk_norm: true), and the line
    says to let it."""
    src = write_eagle1(tmp_path / "src", target)
    rewrite(src, lambda t: t | {f"layers.0.self_attn.{p}_norm.weight": torch.ones(HD) for p in "qk"})
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    line = last_line(res)
    assert "load it with spec" not in line and "omit --spec" in line and "qk_norm" in line, line


def test_a_plain_drafts_line_still_names_its_family(target, tmp_path):
    src = write_eagle3(tmp_path / "src", target)
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")])
    assert "load it with spec eagle3-llama (or omit --spec" in last_line(res), res.output


# --- E. a bad --to is a bad option value ----------------------------------------------------------------------------

def test_an_unknown_layout_exits_2_before_anything_is_read(target, tmp_path, monkeypatch):
    import draftsmith.convert.run as run_mod

    src = write_eagle3(tmp_path / "src", target)
    monkeypatch.setattr(run_mod, "inspect_checkpoint", lambda *a, **k: pytest.fail("read the source"))
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "gguf", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert "unknown layout 'gguf'" in res.stderr and "midlayer, layers, speculators, mistral" in res.stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(OptionError):
        convert(src, "gguf", tmp_path / "out")
    with pytest.raises(ConvertError):   # still a ConvertError to code that caught one
        convert(src, "gguf", tmp_path / "out")


# --- F. config keys the target style can hold are kept ---------------------------------------------------------------

def fp8_mistral(folder, target):
    src = write_mistral_eagle(folder, target)
    def fp8_linear(t):
        w8, scale = quantize(t["eagle_linear.weight"], "tensor")
        return t | {"eagle_linear.weight": w8, "eagle_linear.qscale_weight": scale,
                    "eagle_linear.qscale_act": torch.tensor([0.5])}
    rewrite(src, fp8_linear)
    edit_config(src, name="params.json", quantization={"qformat_weight": "fp8_e4m3", "qscheme_act": "TENSOR"})
    return src


def bits(tensors):
    return {k: v.view(torch.uint8) if v.dtype == torch.float8_e4m3fn else v for k, v in tensors.items()}


def test_a_mistral_quantization_block_survives_mistral_to_itself_and_back_through_layers(target, tmp_path):
    src = fp8_mistral(tmp_path / "m", target)
    params = json.loads((src / "params.json").read_text())
    convert(src, "mistral", tmp_path / "same")
    assert json.loads((tmp_path / "same" / "params.json").read_text()) == params
    convert(src, "layers", tmp_path / "hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["quantization"] == params["quantization"]
    convert(tmp_path / "hf", "mistral", tmp_path / "back")
    assert json.loads((tmp_path / "back" / "params.json").read_text()) == params
    home, back = bits(weights(src)), bits(weights(tmp_path / "back"))
    assert home.keys() == back.keys() and all(torch.equal(home[k], back[k]) for k in home)


def test_a_latent_attention_draft_keeps_its_model_type_and_architectures(target, tmp_path):
    src = write_mla_eagle(tmp_path / "mla", target)
    raw = json.loads((src / "config.json").read_text())
    assert raw["model_type"] == "deepseek_v3"
    convert(src, "layers", tmp_path / "out")
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (cfg["model_type"], cfg["architectures"]) == (raw["model_type"], raw["architectures"])
    assert inspect_checkpoint(tmp_path / "out").match.spec == inspect_checkpoint(src).match.spec
    convert(tmp_path / "out", "layers", tmp_path / "again")
    assert json.loads((tmp_path / "again" / "config.json").read_text())["model_type"] == "deepseek_v3"


def test_a_plain_llama_draft_is_still_written_as_llama(target, tmp_path):
    src = write_eagle3(tmp_path / "src", target)
    edit_config(src, architectures=["LlamaForCausalLMEagle3"])
    cfg = convert(src, "speculators", tmp_path / "s")
    assert cfg["architectures"] == ["Eagle3Speculator"] and "model_type" not in cfg
    assert cfg["transformer_layer_config"]["model_type"] == "llama"


def test_a_line_says_when_even_the_detected_spec_refuses_what_was_written(target, tmp_path):
    """A tensor no spec reads (here a stray one, carried over as the source held it): the line names no spec that
    would load the result, and says to start from inspect."""
    src = write_eagle1(tmp_path / "src", target)
    rewrite(src, lambda t: t | {"layers.0.self_attn.stray.weight": torch.ones(HD)})
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    line = last_line(res)
    assert "load it with spec" not in line and "does not load it as it is" in line and "stray" in line, line
