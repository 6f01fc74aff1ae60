"""Drafts in the real upstream layouts (FORMATS.md), assembled with the built-in specs: weights land bit for bit,
layer 0 has the family's shape, shared modules are the target's own, misfits are refused before any data is read,
and the reduced-vocabulary map and the EAGLE-3 taps obey invariants 24 and 25."""

import json
from pathlib import Path

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.assembler import checkpoint, load
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.assembler.vocab import VocabMapError, check_vocab_map, make_vocab_map, target_to_draft
from draftsmith.components.norms import RMSNorm
from draftsmith.testing import edit_config, write_eagle1, write_eagle3, write_target

TARGET_THETA = 500000.0
H, V = 64, 96


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    """An 8-layer Llama target whose rope differs from the Llama defaults (theta 5e5)."""
    return write_target(tmp_path_factory.mktemp("target"), "llama",
                        rope_parameters={"rope_type": "default", "rope_theta": TARGET_THETA})


def checkpoint_tensors(folder: Path) -> dict[str, torch.Tensor]:
    """The draft's tensors read independently of draftsmith."""
    if (folder / "model.safetensors").is_file():
        return load_file(str(folder / "model.safetensors"))
    return torch.load(folder / "pytorch_model.bin", weights_only=True)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8))


def assert_loaded_bit_for_bit(model, ckpt: dict[str, torch.Tensor], rename, dropped: set[str]) -> None:
    """Every draft parameter and buffer equals its checkpoint tensor after the rules, and every kept checkpoint
    tensor filled one."""
    state = model.draft.state_dict()
    canonical = {rename(n): t for n, t in ckpt.items() if n not in dropped}
    assert set(state) == set(canonical)
    for name, t in canonical.items():
        assert same_bits(state[name], t), name


# --- EAGLE-1 (yuhuili) -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bias, bin_format", [(None, False), (None, True), (False, False), (False, True),
                                              (True, False)])
def test_eagle1_loads_bit_for_bit_and_shares_embed_and_head(target, tmp_path, bias, bin_format):
    draft = write_eagle1(tmp_path / "d", target, bias=bias, bin_format=bin_format)
    config = json.loads((draft / "config.json").read_text())
    assert ("bias" in config) == (bias is not None)  # None: the key is absent, as in the Vicuna drafts
    assert (draft / ("pytorch_model.bin" if bin_format else "model.safetensors")).is_file()
    ckpt = checkpoint_tensors(draft)
    model = draftsmith.assemble("eagle1-llama", target=target, draft=draft)

    has_bias = bias is not False
    assert ("fc.bias" in ckpt) == has_bias and (model.draft.fc.bias is not None) == has_bias
    assert_loaded_bit_for_bit(model, ckpt, rename=lambda n: n, dropped={"embed_tokens.weight"})
    layer0 = model.draft.layers[0]
    assert type(layer0.input_layernorm) is nn.Identity and isinstance(layer0.post_attention_layernorm, RMSNorm)
    assert layer0.self_attn.q_proj.in_features == H
    # shared, not copied: the draft uses the target's own modules, and its checkpoint's embed copy is unused
    assert model.draft_embed is model.target.model.embed_tokens
    assert model.draft_head is model.target.lm_head
    assert not hasattr(model.draft, "embed_tokens") and not hasattr(model.draft, "lm_head")
    assert not torch.equal(model.draft_embed.weight, ckpt["embed_tokens.weight"])


# --- EAGLE-3 (midlayer) ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("draft_vocab", [40, None])
def test_eagle3_loads_bit_for_bit_with_or_without_a_reduced_vocabulary(target, tmp_path, draft_vocab):
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=draft_vocab)
    ckpt = checkpoint_tensors(draft)
    assert ("d2t" in ckpt) == ("t2d" in ckpt) == (draft_vocab is not None)
    model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)

    assert_loaded_bit_for_bit(model, ckpt, rename=lambda n: n.replace("midlayer.", "layers.0.", 1), dropped=set())
    layer0 = model.draft.layers[0]
    for proj in ("q_proj", "k_proj", "v_proj"):
        assert getattr(layer0.self_attn, proj).in_features == 2 * H
    assert isinstance(layer0.hidden_norm, RMSNorm) and isinstance(layer0.input_layernorm, RMSNorm)
    assert model.draft.fc.in_features == 3 * H and model.draft.taps == (2, 4, 5)  # [2, L//2, L-3], L = 8
    assert model.draft_embed is model.target.model.embed_tokens
    assert model.draft_head is model.draft.lm_head and model.draft_head.out_features == (draft_vocab or V)

    # the draft's logits cover exactly the kept target tokens
    out = torch.randn(1, 3, H)
    with torch.no_grad():
        logits = model.draft.logits(out, model.draft_head)
    assert logits.shape == (1, 3, V)
    kept = torch.isfinite(logits[0, 0])
    assert torch.equal(kept, ckpt["t2d"]) if draft_vocab else bool(kept.all())


def write_misfit(folder: Path) -> None:
    """One wrongly shaped, one missing and one unexpected tensor."""
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["midlayer.mlp.up_proj.weight"] = tensors["midlayer.mlp.up_proj.weight"].t().contiguous()
    del tensors["midlayer.post_attention_layernorm.weight"]
    tensors["midlayer.self_attn.rotary_emb.weight"] = torch.zeros(4)
    save_file(tensors, str(folder / "model.safetensors"))


def forbid_reading(monkeypatch):
    def no_data(*_, **__):
        raise AssertionError("tensor data was read")

    monkeypatch.setattr(checkpoint, "read_tensors", no_data)
    monkeypatch.setattr(load, "read_tensors", no_data)


def test_misfits_fail_with_one_error_before_any_tensor_is_read(target, tmp_path, monkeypatch):
    draft = write_eagle3(tmp_path / "d", target)
    forbid_reading(monkeypatch)
    with pytest.raises(AssertionError, match="tensor data was read"):  # the patch does cover every read
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    write_misfit(draft)
    with pytest.raises(CheckpointMismatch) as info:  # also the target's data is never read first
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    problems = info.value.problems
    assert len(problems) == 3, str(info.value)
    missing, unexpected, shape = problems
    assert missing.startswith("missing: 'layers.0.post_attention_layernorm.weight' [64]")
    assert unexpected.startswith("unexpected: 'midlayer.self_attn.rotary_emb.weight'")
    assert shape.startswith("wrong shape: 'layers.0.mlp.up_proj.weight' is [64, 128] in the checkpoint, "
                            "the model expects [128, 64]")
    assert "rule 0 (line 24): '^midlayer\\.' -> 'layers.0.'" in shape   # the line of eagle3-llama.yaml
    assert str(info.value).startswith(f"{draft} does not fit spec 'eagle3-llama': 3 problems")


def test_reduced_vocabulary_without_d2t_is_refused_naming_it(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=40)
    tensors = load_file(str(draft / "model.safetensors"))
    del tensors["d2t"]
    save_file(tensors, str(draft / "model.safetensors"))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert info.value.problems == ["missing: 'd2t' [40] int64"]


def test_corrupted_vocabulary_map_in_a_checkpoint_is_refused(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=40)
    tensors = load_file(str(draft / "model.safetensors"))
    tensors["d2t"] = torch.arange(40) + tensors["d2t"]  # absolute target ids instead of offsets
    save_file(tensors, str(draft / "model.safetensors"))
    with pytest.raises(VocabMapError, match="t2d does not hold|leaves the target vocabulary"):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)


# --- invariant 24: the vocabulary map ----------------------------------------------------------------------------

@st.composite
def kept_tokens(draw, min_size: int = 1):
    vocab = draw(st.integers(min_size, 300))
    kept = draw(st.lists(st.integers(0, vocab - 1), min_size=min_size, max_size=vocab, unique=True))
    return torch.tensor(kept), vocab


@given(kept_tokens())
def test_vocab_map_invariant(case):
    kept, vocab = case
    d2t, t2d = make_vocab_map(kept, vocab)
    vd = kept.numel()
    assert d2t.dtype == torch.int64 and t2d.dtype == torch.bool and d2t.shape == (vd,) and t2d.shape == (vocab,)
    assert int(t2d.sum()) == vd
    ids = torch.arange(vd) + d2t                                   # target id of each draft id
    assert bool((ids[1:] > ids[:-1]).all())
    assert bool(t2d[ids].all()) and ids.tolist() == sorted(kept.tolist())
    back = target_to_draft(t2d)
    assert torch.equal(back[ids], torch.arange(vd))                # draft -> target -> draft
    assert torch.equal(ids[back[kept]], kept)                      # target -> draft -> target on kept tokens
    assert torch.equal(back == -1, ~t2d)
    check_vocab_map(d2t, t2d)


def test_a_reduced_vocabulary_of_the_first_tokens_has_zero_offsets_and_is_valid():
    d2t, t2d = make_vocab_map(torch.arange(5), 12)
    assert not d2t.any()
    check_vocab_map(d2t, t2d)


@given(kept_tokens(min_size=2))
def test_absolute_ids_instead_of_offsets_are_refused(case):
    kept, vocab = case
    d2t, t2d = make_vocab_map(kept, vocab)
    absolute = torch.arange(kept.numel()) + d2t
    assume(not torch.equal(absolute, d2t))
    with pytest.raises(VocabMapError, match="t2d does not hold|leaves the target vocabulary"):
        check_vocab_map(absolute, t2d)


@given(kept_tokens(), st.data())
def test_a_wrong_t2d_count_is_refused(case, data):
    kept, vocab = case
    d2t, t2d = make_vocab_map(kept, vocab)
    flip = data.draw(st.integers(0, vocab - 1))
    t2d[flip] = ~t2d[flip]                                           # one token too many or too few
    with pytest.raises(VocabMapError, match=f"t2d marks {int(t2d.sum())} target tokens but the draft "
                                            f"vocabulary has {kept.numel()}"):
        check_vocab_map(d2t, t2d)


# --- invariant 25: EAGLE-3 taps ----------------------------------------------------------------------------------

def test_default_taps_that_collide_on_a_small_target_are_refused(tmp_path):
    small = write_target(tmp_path / "t", "llama", num_hidden_layers=5)
    draft = write_eagle3(tmp_path / "d", small)
    with pytest.raises(draftsmith.SpecError) as info:
        draftsmith.assemble("eagle3-llama", target=small, draft=draft)
    text = str(info.value)
    assert "draft.fusion.aux_layers" in text and "[2, 2, 2]" in text and "layer(s) [2] more than once" in text
    assert "5-layer target" in text


def test_explicit_eagle_config_ids_are_the_taps(tmp_path):
    small = write_target(tmp_path / "t", "llama", num_hidden_layers=5)
    draft = write_eagle3(tmp_path / "d", small, aux_ids=[0, 1, 3])
    model = draftsmith.assemble("eagle3-llama", target=small, draft=draft)
    assert model.draft.taps == (0, 1, 3)
    # the target hands over exactly transformers' hidden_states[i] (the input of layer i) for those ids
    ids = torch.randint(0, V, (1, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, aux = model.target(ids, torch.arange(7)[None], taps=model.draft.taps)
        states = AutoModelForCausalLM.from_pretrained(small).eval()(ids, output_hidden_states=True).hidden_states
    torch.testing.assert_close(aux, torch.cat([states[i] for i in (0, 1, 3)], -1), atol=1e-5, rtol=0)


# --- rotary settings come from the draft's own config ------------------------------------------------------------

def llama_default_inv_freq(head_dim: int, theta: float) -> torch.Tensor:
    return 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)


@pytest.mark.parametrize("spec, write", [("eagle1-llama", write_eagle1), ("eagle3-llama", write_eagle3)])
@pytest.mark.parametrize("rope_theta", [None, 20000.0])
def test_draft_rope_comes_from_the_draft_config_never_the_target(target, tmp_path, spec, write, rope_theta):
    draft = write(tmp_path / "d", target)
    edit_config(draft, drop=["rope_theta"] if rope_theta is None else [], rope_theta=rope_theta,
                max_position_embeddings=2048)  # stale template values
    model = draftsmith.assemble(spec, target=target, draft=draft)
    rope = model.draft.layers[0].self_attn.rope
    want = llama_default_inv_freq(16, rope_theta or 10000.0)          # transformers' Llama default: 10000
    torch.testing.assert_close(rope.inv_freq, want, atol=0, rtol=0)
    assert rope.scale == 1.0 and rope.config.max_position_embeddings == 2048
    target_rope = model.target.model.layers[0].self_attn.rope
    torch.testing.assert_close(target_rope.inv_freq, llama_default_inv_freq(16, TARGET_THETA), atol=0, rtol=0)


def spec_with(tmp_path: Path, name: str, hidden, ignore: tuple[str, ...] = ()) -> Path:
    """The built-in spec ``name`` with ``draft.norms.hidden`` set (and more names ignored), as a YAML file."""
    import yaml

    data = yaml.safe_load((Path(draftsmith.__file__).parent / "specs" / "builtin" / f"{name}.yaml").read_text())
    data["draft"]["norms"]["hidden"] = hidden
    data["weights"]["ignore"] = [*data["weights"].get("ignore", []), *ignore]
    path = tmp_path / f"{name}-{hidden}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("hidden", ["auto", True])
def test_eagle3s_hidden_norm_slot_is_filled_by_default_and_when_stated(target, tmp_path, hidden):
    draft = write_eagle3(tmp_path / "d", target)
    model = draftsmith.assemble(spec_with(tmp_path, "eagle3-llama", hidden), target=target, draft=draft)
    assert isinstance(model.draft.layers[0].hidden_norm, RMSNorm)


def test_an_empty_hidden_norm_slot_is_an_identity_and_its_weight_unexpected(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target)
    with pytest.raises(CheckpointMismatch, match="hidden_norm"):
        draftsmith.assemble(spec_with(tmp_path, "eagle3-llama", False), target=target, draft=draft)
    model = draftsmith.assemble(spec_with(tmp_path, "eagle3-llama", False, ignore=(r"^midlayer\.hidden_norm\.",)),
                                target=target, draft=draft)
    assert isinstance(model.draft.layers[0].hidden_norm, nn.Identity)
    prompt = [3, 9, 27, 81 % V]
    assert model.generate(prompt, max_new_tokens=8).token_ids == model.generate_baseline(prompt, 8).token_ids


def test_a_hidden_norm_on_a_fusion_without_that_slot_is_a_spec_error(target, tmp_path):
    draft = write_eagle1(tmp_path / "d", target)
    with pytest.raises(draftsmith.SpecError, match=r"draft\.norms\.hidden: true: fusion 'eagle1' has no hidden-norm "
                                                   r"slot(.|\n)*allowed: auto or false"):
        draftsmith.assemble(spec_with(tmp_path, "eagle1-llama", True), target=target, draft=draft)
