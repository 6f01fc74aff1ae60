"""Mutation round 13: draftsmith.testing's tiny-checkpoint writers, pinned where a planted bug survived the other
tests. The written layouts are FORMATS.md's, tensor names, shapes and config fields, so the tests that build on them
cannot pass on a wrong layout: the draft writers (EAGLE-1, HASS speculators, EAGLE-3 in each layout, their seeds,
folders and weights), write_target with the byte tokenizer, the last-message tokenizer and the self-draft. The
round's tests of draftsmith/cli/app.py's error reporting: test_cli_app_kills_round13.py."""
import json
import re

import pytest
import torch
from safetensors.torch import load_file


# --- draftsmith.testing: the layouts the writers write (FORMATS.md) ------------------------------------------------

H, I, NH, NKV, D, V = 16, 24, 4, 2, 6, 40   # nH·d = 24 != H: a q/o shape mixing the two is seen
TARGET = dict(hidden_size=H, intermediate_size=I, num_attention_heads=NH, num_key_value_heads=NKV, head_dim=D,
              vocab_size=V, rms_norm_eps=1e-5, max_position_embeddings=64, rope_theta=5e5, num_hidden_layers=8)
COPIED = {k: TARGET[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                                 "vocab_size", "head_dim", "rms_norm_eps", "max_position_embeddings", "rope_theta")}


def config_only(folder, **config):
    """A target folder with only its config.json: what the draft writers read of it."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture
def target(tmp_path):
    return config_only(tmp_path / "t", **TARGET)


def shapes(folder, file="model.safetensors"):
    """(config.json, {tensor: shape}) of a written folder; only ``file`` holds its tensors."""
    assert sorted(p.name for p in folder.iterdir()) == sorted(["config.json", file])
    tensors = torch.load(folder / file) if file.endswith(".bin") else load_file(str(folder / file))
    return json.loads((folder / "config.json").read_text()), {k: tuple(v.shape) for k, v in tensors.items()}


def tensors(folder):
    file = folder / "pytorch_model.bin"
    return torch.load(file) if file.exists() else load_file(str(folder / "model.safetensors"))


def llama_layer(prefix, width, input_norm=True, hidden_norm=False):
    """A Llama decoder layer's tensors and shapes (FORMATS.md), attention over an input of ``width``."""
    t = {f"{prefix}self_attn.q_proj.weight": (NH * D, width), f"{prefix}self_attn.k_proj.weight": (NKV * D, width),
         f"{prefix}self_attn.v_proj.weight": (NKV * D, width), f"{prefix}self_attn.o_proj.weight": (H, NH * D),
         f"{prefix}mlp.gate_proj.weight": (I, H), f"{prefix}mlp.up_proj.weight": (I, H),
         f"{prefix}mlp.down_proj.weight": (H, I), f"{prefix}post_attention_layernorm.weight": (H,)}
    t |= {f"{prefix}input_layernorm.weight": (H,)} if input_norm else {}
    return t | ({f"{prefix}hidden_norm.weight": (H,)} if hidden_norm else {})


def near_one(t: torch.Tensor) -> bool:
    """A norm weight as the writers make them: 1 plus a small random perturbation, not constant."""
    return bool(((t - 1).abs() < 0.5).all()) and t.unique().numel() > 1


def small_weights(folder) -> None:
    """Every tensor of a written draft is what a trained one looks like: norm weights near 1, the others small
    random values (std 0.05), none constant (d2t / t2d: integers)."""
    for name, t in tensors(folder).items():
        if t.is_floating_point():
            centre = 1 if re.search(r"norm(\.\d+)?\.weight$", name) else 0
            assert bool(((t - centre).abs() < 0.5).all()) and t.unique().numel() > 1, name


def test_the_drafts_default_seeds_and_folders(target, tmp_path):
    """The default seeds (1, 1, 2: a draft's weights are never its target's), a folder made with its parents or
    written into when it exists, its config.json indented as save_pretrained writes it."""
    from draftsmith.testing import write_eagle1, write_eagle1_speculators, write_eagle3

    (tmp_path / "there").mkdir()
    for write, seed in ((write_eagle1, 1), (write_eagle1_speculators, 1), (write_eagle3, 2)):
        name = write.__name__
        a = tensors(write(tmp_path / "new" / name, target))
        b = tensors(write(tmp_path / "there", target, seed=seed))
        assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a), name
    assert (tmp_path / "there" / "config.json").read_text().startswith('{\n  "architectures": [\n    "')


def test_eagle1_is_the_yuhuili_layout(target, tmp_path):
    from draftsmith.testing import write_eagle1

    config, got = shapes(write_eagle1(tmp_path / "d", target))
    assert got == {"fc.weight": (H, 2 * H), "fc.bias": (H,), "embed_tokens.weight": (V, H),
                   **llama_layer("layers.0.", H, input_norm=False)}   # layer 0 has no input_layernorm
    assert config == {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
                      **COPIED}   # no bias key: a bias, as in the Vicuna drafts
    small_weights(tmp_path / "d")


@pytest.mark.parametrize("bias", [True, False])
def test_eagle1_says_its_bias_and_has_one_only_when_it_says_so(bias, target, tmp_path):
    from draftsmith.testing import write_eagle1

    config, got = shapes(write_eagle1(tmp_path / "d", target, bias=bias, embed=False, bin_format=True),
                         "pytorch_model.bin")
    assert config["bias"] is bias and ("fc.bias" in got) is bias and "embed_tokens.weight" not in got
    small_weights(tmp_path / "d")


def test_the_head_dim_defaults_to_h_over_heads_and_the_kv_heads_to_the_heads(tmp_path):
    from draftsmith.testing import write_eagle1

    folder = config_only(tmp_path / "t", **{k: v for k, v in TARGET.items() if k not in ("head_dim",
                                                                                          "num_key_value_heads")})
    _, got = shapes(write_eagle1(tmp_path / "d", folder))
    assert got["layers.0.self_attn.q_proj.weight"] == got["layers.0.self_attn.k_proj.weight"] == (H, H)


def test_a_target_in_transformers_5_style_gives_the_draft_its_rope_theta(tmp_path):
    from draftsmith.testing import write_eagle1

    base = {k: v for k, v in TARGET.items() if k != "rope_theta"}
    five = config_only(tmp_path / "five", **base, rope_parameters={"rope_type": "default", "rope_theta": 1234.0})
    assert shapes(write_eagle1(tmp_path / "d5", five))[0]["rope_theta"] == 1234.0
    both = config_only(tmp_path / "both", **TARGET, rope_parameters={"rope_theta": 1234.0})
    assert shapes(write_eagle1(tmp_path / "db", both))[0]["rope_theta"] == 5e5   # the draft's own key wins
    none = config_only(tmp_path / "none", **base)
    assert "rope_theta" not in shapes(write_eagle1(tmp_path / "dn", none))[0]


def test_eagle1_speculators_is_the_hass_layout(target, tmp_path):
    from draftsmith.testing import write_eagle1_speculators

    config, got = shapes(write_eagle1_speculators(tmp_path / "d", target))
    assert got == {"fusion_fc.weight": (H, 2 * H), "fusion_fc.bias": (H,), "embed_tokens.weight": (V, H),
                   "lm_head.weight": (V, H), **llama_layer("transformer.", H, input_norm=False)}
    assert "model_type" not in config and config["architectures"] == ["EagleSpeculator"]
    assert config["speculators_model_type"] == "eagle" and config["transformer_layer_architecture"] == \
        "LlamaDecoderLayer"
    assert config["transformer_layer_config"] == {"model_type": "llama", "num_hidden_layers": 1, **COPIED}
    assert (config["layernorms"], config["fusion_bias"]) == (False, True)
    assert config["speculators_config"]["proposal_methods"] == [{"proposal_type": "greedy", "speculative_tokens": 5}]
    small_weights(tmp_path / "d")


def test_eagle1_speculators_with_layernorms_and_without_bias_or_heads(target, tmp_path):
    from draftsmith.testing import write_eagle1_speculators

    config, got = shapes(write_eagle1_speculators(tmp_path / "d", target, fusion_bias=False, layernorms=True,
                                                  heads=False))
    assert got == {"fusion_fc.weight": (H, 2 * H), "embedding_layernorm.weight": (H,),
                   "pre_lm_head_layernorm.weight": (H,), **llama_layer("transformer.", H)}
    assert (config["layernorms"], config["fusion_bias"]) == (True, False)
    small_weights(tmp_path / "d")


def test_eagle3_is_the_single_layer_midlayer_layout(target, tmp_path):
    from draftsmith.testing import write_eagle3

    config, got = shapes(write_eagle3(tmp_path / "d", target))
    assert got == {"fc.weight": (H, 3 * H), "norm.weight": (H,), "lm_head.weight": (V, H),
                   **llama_layer("midlayer.", 2 * H, hidden_norm=True)}   # no d2t / t2d: the full vocabulary
    assert config == {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
                      **COPIED, "draft_vocab_size": V}
    small_weights(tmp_path / "d")
    with pytest.raises(ValueError, match="exactly one layer"):
        write_eagle3(tmp_path / "two", target, layers=2)


def test_eagle3_in_layers_has_only_layer_0_taking_2h_with_a_hidden_norm(target, tmp_path):
    from draftsmith.testing import write_eagle3

    config, got = shapes(write_eagle3(tmp_path / "d", target, layout="layers", layers=3, aux_ids=[1, 4],
                                      embed=True, bin_format=True), "pytorch_model.bin")
    assert got == {"fc.weight": (H, 2 * H), "norm.weight": (H,), "lm_head.weight": (V, H),
                   "embed_tokens.weight": (V, H), **llama_layer("layers.0.", 2 * H, hidden_norm=True),
                   **llama_layer("layers.1.", H), **llama_layer("layers.2.", H)}
    assert config["num_hidden_layers"] == 3 and config["eagle_config"] == {"eagle_aux_hidden_state_layer_ids": [1, 4]}
    small_weights(tmp_path / "d")
    _, one = shapes(write_eagle3(tmp_path / "one", target, layout="layers"))
    assert not any(n.startswith("layers.1.") for n in one)


@pytest.mark.parametrize("d2t", ["offset", "absolute"])
def test_eagle3_with_a_reduced_vocabulary_writes_d2t_and_t2d(d2t, target, tmp_path):
    from draftsmith.testing import write_eagle3

    config, got = shapes(write_eagle3(tmp_path / "d", target, draft_vocab=12, d2t=d2t))
    assert config["draft_vocab_size"] == 12 and (got["lm_head.weight"], got["d2t"], got["t2d"]) == ((12, H), (12,),
                                                                                                   (V,))
    t = tensors(tmp_path / "d")
    assert t["d2t"].dtype == torch.int64 and t["t2d"].dtype == torch.bool and int(t["t2d"].sum()) == 12
    kept = t["t2d"].nonzero().flatten()   # the target ids kept, ascending
    ids = t["d2t"] + torch.arange(12) if d2t == "offset" else t["d2t"]   # target = draft + d2t[draft]
    assert torch.equal(ids, kept) and bool((t["d2t"] != 0).any()), (t["d2t"], kept)


def test_eagle3_norms_before_fc_and_the_nemo_prefix(target, tmp_path):
    from draftsmith.testing import write_eagle3

    config, got = shapes(write_eagle3(tmp_path / "d", target, layout="nemo", fc_norm=True, draft_vocab=12,
                                      aux_ids=[1, 3], ids_key="top"))
    expected = {"fc.weight": (H, 2 * H), "norm.weight": (H,), "fc_norm.0.weight": (H,), "fc_norm.1.weight": (H,),
                **llama_layer("layers.0.", 2 * H, hidden_norm=True)}
    assert got == {**{f"model.{n}": s for n, s in expected.items()}, "lm_head.weight": (12, H), "d2t": (12,),
                   "t2d": (V,)}
    assert config["fc_norm"] is True and "norm_before_fc" not in config and "eagle_config" not in config
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 3]
    small_weights(tmp_path / "d")
    config, got = shapes(write_eagle3(tmp_path / "nb", target, norm_before_fc=True, ids_key="target_layer_ids",
                                      aux_ids=[0, 2, 4, 6, 7], flags={"norm_before_residual": True}))
    assert got["input_norm.weight"] == (5 * H,) and got["fc.weight"] == (H, 5 * H) and "fc_norm.0.weight" not in got
    assert config["norm_before_fc"] is True and config["target_layer_ids"] == [0, 2, 4, 6, 7]
    assert config["norm_before_residual"] is True and "fc_norm" not in config
    small_weights(tmp_path / "nb")


def test_eagle3_in_the_speculators_config(target, tmp_path):
    from draftsmith.testing import write_eagle3

    config, _ = shapes(write_eagle3(tmp_path / "d", target, config="speculators"))
    assert "model_type" not in config and config["architectures"] == ["Eagle3Speculator"]
    assert config["speculators_model_type"] == "eagle3" and config["target_hidden_size"] is None
    assert config["transformer_layer_config"] == {"model_type": "llama", "num_hidden_layers": 1, **COPIED}
    assert config["draft_vocab_size"] == V and "eagle_aux_hidden_state_layer_ids" not in config
    assert {f: config[f] for f in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")} == \
        dict.fromkeys(("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"), False)
    config, _ = shapes(write_eagle3(tmp_path / "ids", target, config="speculators", aux_ids=[1, 2],
                                    ids_key="target_layer_ids", flags={"norm_output": True}))
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 2] and "target_layer_ids" not in config
    assert config["norm_output"] is True and "eagle_config" not in config


# --- write_target, the byte tokenizer, the self-draft: transformers' own folders ----------------------------------

# the default sizes other tests count on: GQA (2 KV heads for 4), 8 layers (aux layers 2, 4, 5), 96 tokens
SIZES = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
             num_hidden_layers=8, vocab_size=96, max_position_embeddings=512)


@pytest.fixture(scope="module")
def hf_target(tmp_path_factory):
    from draftsmith.testing import write_target

    return write_target(tmp_path_factory.mktemp("hf") / "t", tokenizer=True)


def test_a_target_with_the_byte_tokenizer_covers_its_ids(hf_target):
    config = json.loads((hf_target / "config.json").read_text())
    assert (config["vocab_size"], config["bos_token_id"], config["eos_token_id"]) == (258, 256, 257)
    assert {k: config[k] for k in SIZES} == {**SIZES, "vocab_size": 258} and config["model_type"] == "llama"
    assert {"model.safetensors", "tokenizer.json"} <= {p.name for p in hf_target.iterdir()}
    t = tensors(hf_target)
    # transformers' constant norms (1) are perturbed: a norm loaded into the wrong slot changes the logits
    assert near_one(t["model.norm.weight"]) and near_one(t["model.layers.1.input_layernorm.weight"])
    # the random weights are left at their initializer_range (0.15): only constant tensors are perturbed
    assert abs(float(t["model.layers.0.mlp.gate_proj.weight"].std()) - 0.15) < 0.01


def test_a_vocabulary_of_exactly_the_byte_ids_is_enough_and_one_less_is_refused(tmp_path):
    from draftsmith.testing import write_target

    with pytest.raises(ValueError) as info:
        write_target(tmp_path / "t", tokenizer=True, vocab_size=257)
    assert str(info.value) == ("a byte tokenizer writes ids up to 257: vocab_size 257 would not embed them (leave it "
                               "out, or >= 258)")


def test_the_byte_tokenizer_ids(hf_target, tmp_path):
    from transformers import AutoTokenizer

    from draftsmith.testing import write_byte_tokenizer

    vocab = json.loads((hf_target / "tokenizer.json").read_text())["model"]["vocab"]   # the BPE model's own ids
    assert sorted(vocab.values()) == list(range(258)) and (vocab["<s>"], vocab["</s>"]) == (256, 257)
    tok = AutoTokenizer.from_pretrained(str(hf_target))
    assert (tok.bos_token_id, tok.eos_token_id) == (256, 257) and len(tok) == 258
    assert tok.convert_tokens_to_ids(["<s>", "</s>"]) == [256, 257]
    assert tok.encode(" ", add_special_tokens=False) == [220]   # the sorted ByteLevel alphabet, not byte values
    ids = tok.encode("hi", add_special_tokens=False)
    assert len(ids) == 2 and tok.decode(ids) == "hi"   # no prefix space added
    write_byte_tokenizer(tmp_path, chat_template="{{ messages[0]['content'] }}!")
    chat = AutoTokenizer.from_pretrained(str(tmp_path))
    assert chat.apply_chat_template([{"role": "user", "content": "yo"}], tokenize=False) == "yo!"


def test_the_last_message_tokenizer():
    from draftsmith.testing import LastMessageTokenizer

    tok = LastMessageTokenizer()
    text = tok.apply_chat_template([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                    {"role": "user", "content": "ab "}])
    assert text == "ab " and tok.encode(text) == [ord("a") % 32, ord("b") % 32, 0]


def test_the_self_draft_is_the_target_with_its_attention_zeroed_and_its_head_scaled(tmp_path):
    from transformers import AutoModelForCausalLM

    from draftsmith.testing import write_self_draft, write_target

    target = write_target(tmp_path / "t")
    assert {p.name for p in target.iterdir()} == {"config.json", "generation_config.json", "model.safetensors"}
    assert {k: v for k, v in json.loads((target / "config.json").read_text()).items() if k in SIZES} == SIZES
    src = tensors(target)
    same = tensors(write_target(tmp_path / "seed0", seed=0))   # the default seed is 0
    assert all(torch.equal(src[n], same[n]) for n in src)
    config, got = shapes(write_self_draft(tmp_path / "d", target, margin=30.0))
    src = tensors(target)
    assert all(not src[n].any() for n in src if n.endswith("o_proj.weight"))
    assert config["num_hidden_layers"] == 8 and config["bias"] is False
    t = tensors(tmp_path / "d")
    assert got["fc.weight"] == (64, 128) and torch.equal(t["fc.weight"], torch.cat([torch.eye(64),
                                                                                    torch.zeros(64, 64)], 1))
    assert torch.equal(t["norm.weight"], src["model.norm.weight"])
    assert {n for n in got if n.startswith("layers.")} == {n.removeprefix("model.") for n in src
                                                          if n.startswith("model.layers.")}
    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float64).eval()
    with torch.no_grad():
        top2 = model(torch.arange(96)[:, None]).logits[:, 0].topk(2, dim=-1).values
    assert float((top2[:, 0] - top2[:, 1]).min()) == pytest.approx(30.0, rel=1e-3)   # the best leads by the margin


# --- survivors left, and why they are equivalent -------------------------------------------------------------------
# testing/__init__.py:
#   :43 p.numel() > 1 -> > 0 / > 2, p.flatten()[0] -> [1]: the Llama written has no parameter of 1 or 2 elements, and
#     a constant tensor equals every one of its elements.
#   :65 :67 :69 :120 :121 :162 :174 :176 "1 + w * s" -> "1 - w * s": a norm weight is 1 plus a symmetric random
#     perturbation either way.
#   :234 topk(2) -> topk(3): the first two values are the same; dim=-1 -> dim=1 (the minus dropped): the same axis of
#     the 2-D logits.
#   :270 :273 LastMessageTokenizer's tokenize / add_generation_prompt / add_special_tokens defaults: never read.
