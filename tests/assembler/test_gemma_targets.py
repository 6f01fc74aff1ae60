"""Gemma targets (``gemma3_text``: Gemma-3 1B; ``gemma3``: the text model of Gemma-3 4B / 12B / 27B; ``gemma2``),
written by transformers itself (``save_pretrained``, float32): RMSNorms of weights stored as offsets from 1, the
embedding times sqrt(hidden_size), four norms a layer (the attention's and the MLP's outputs normed before their
adds), GeGLU MLPs, scores scaled by query_pre_attn_scalar, q/k norms (Gemma-3), windows on the layers layer_types
marks sliding with their own rope (Gemma-3: rope_local_base_freq, a linear-scaled global rope), Gemma-2's tanh caps
on the scores and the logits, tied embeddings. Each gives transformers' logits (float32, 1e-4) over a whole sequence
and through the paged pool; greedy speculative decoding equals target-only; what is not computed is refused by name
before any tensor is read."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForImageTextToText

import draftsmith
from draftsmith.testing import SIZES, write_target
from test_phi3_target import echo_draft, edited
from test_targets_zoo import ATOL, IDS, full_logits, ours, paged_logits, reference, refusal_before_tensors

SMALL = {"head_dim": 16, "query_pre_attn_scalar": 24, "sliding_window": 4}   # a scale other than head_dim's
FIVE_TO_ONE = ["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention"]   # Gemma-3's pattern, 7 layers
LINEAR_GLOBAL = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},   # Gemma-3 4B / 12B / 27B
                 "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}
T4 = "transformers 4 config"   # rope_theta, rope_local_base_freq, rope_scaling and sliding_window_pattern, as the Hub's
CASES = {   # name: (model_type, write_target overrides)
    "gemma-3-1b (5:1)": ("gemma3_text", {"layer_types": FIVE_TO_ONE}),
    "gemma-3-4b text (linear global rope)": ("gemma3_text", {"layer_types": FIVE_TO_ONE,
                                                             "rope_parameters": LINEAR_GLOBAL}),
    "gemma-3 " + T4: ("gemma3_text", {T4: True}),
    # attn_logit_softcapping: unread by transformers' Gemma-3 (its attention passes no cap), and by draftsmith
    "gemma-3 biases, untied, caps": ("gemma3_text", {"attention_bias": True, "tie_word_embeddings": False,
                                                     "final_logit_softcapping": 2.0, "attn_logit_softcapping": 1.0,
                                                          "layer_types": ["sliding_attention", "full_attention"]}),
    "gemma-2 (caps binding)": ("gemma2", {"attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0}),
    "gemma-2 (default caps)": ("gemma2", {}),
    "gemma-2 (no caps)": ("gemma2", {"attn_logit_softcapping": None, "final_logit_softcapping": None}),
}


def t4_config(folder):
    """The config.json as the Hub's Gemma-3 1B writes it (transformers 4): no rope_parameters nor layer_types."""
    cfg = json.loads((folder / "config.json").read_text())
    for key in ("rope_parameters", "layer_types", "_sliding_window_pattern"):
        cfg.pop(key, None)
    cfg |= {"rope_theta": 1e6, "rope_local_base_freq": 1e4, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
            "sliding_window_pattern": 6}
    (folder / "config.json").write_text(json.dumps(cfg))


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made = {}

    def get(name, layers=7):   # 8 layers where an EAGLE-3 draft taps them
        if (name, layers) not in made:
            model_type, over = CASES[name]
            over = {**SMALL, **over}
            legacy = over.pop(T4, False)
            if "layer_types" in over and len(over["layer_types"]) != layers:
                over["layer_types"] = (over["layer_types"] * layers)[:layers]
            folder = write_target(tmp_path_factory.mktemp("gemma"), model_type, num_hidden_layers=layers, **over)
            if legacy:
                t4_config(folder)
            made[name, layers] = folder
        return made[name, layers]
    return get


def test_the_checkpoints_hold_gemma_s_four_norms_a_layer(targets):
    names = set(load_file(str(targets("gemma-3-1b (5:1)") / "model.safetensors")))
    assert {f"model.layers.0.{n}.weight" for n in ("input_layernorm", "post_attention_layernorm",
                                                    "pre_feedforward_layernorm", "post_feedforward_layernorm",
                                                    "self_attn.q_norm", "self_attn.k_norm")} <= names
    assert "lm_head.weight" not in names   # tied


@pytest.mark.parametrize("name", sorted(CASES))
def test_gemma_logits_match_transformers(targets, name):
    want = reference(targets(name), IDS)
    assert want.std() > 0.1
    torch.testing.assert_close(full_logits(ours(targets(name)), IDS), want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["gemma-3-4b text (linear global rope)", "gemma-2 (caps binding)"])
def test_paged_prefill_then_decode_matches_transformers(targets, name):
    folder = targets(name)
    torch.testing.assert_close(paged_logits(ours(folder), IDS[0]), reference(folder, IDS[:1])[0], atol=ATOL, rtol=0)


def test_the_transformers_4_config_is_read_as_transformers_reads_it(targets):
    cfg = AutoConfig.from_pretrained(targets("gemma-3 " + T4))
    assert cfg.layer_types == FIVE_TO_ONE
    assert cfg.rope_parameters["sliding_attention"]["rope_theta"] == 1e4
    assert cfg.rope_parameters["full_attention"] == {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}


def test_each_layer_rotates_with_its_layer_type_s_rope(targets):
    """Sliding layers rotate with the local base (1e4), full ones with the global base, scaled as the config says:
    what the parity tests above would see if a layer took the other rope."""
    layers = ours(targets("gemma-3-4b text (linear global rope)")).model.layers
    local, full = layers[0].self_attn.rope.inv_freq, layers[5].self_attn.rope.inv_freq
    pairs = torch.arange(0, 16, 2, dtype=torch.float32) / 16
    torch.testing.assert_close(local, 1.0 / 1e4**pairs)
    torch.testing.assert_close(full, 1.0 / 1e6**pairs / 8.0)


def test_the_hub_s_gemma2_config_with_hidden_act_loads(targets, tmp_path):
    """The Hub's Gemma-2 config.json states hidden_act beside hidden_activation: Gemma2Config declares the latter
    alone, and its model reads it alone, so the generic check of hidden_act (silu for a Llama MLP) leaves it be."""
    folder = edited(targets("gemma-2 (default caps)"), tmp_path, hidden_act="gelu_pytorch_tanh")
    torch.testing.assert_close(full_logits(ours(folder), IDS), reference(folder, IDS), atol=ATOL, rtol=0)


def test_the_window_and_the_caps_matter_here(targets, tmp_path):
    """The same weights without the window, or without Gemma-2's score cap, give other logits: the parity tests
    above would see either mistake."""
    folder = targets("gemma-3-1b (5:1)")
    got = full_logits(ours(folder), IDS)
    wide = edited(folder, tmp_path / "wide", sliding_window=64)
    assert (full_logits(ours(wide), IDS)[:, 5:] - got[:, 5:]).abs().max() > 1e-2
    capped = targets("gemma-2 (caps binding)")
    uncapped = edited(capped, tmp_path / "uncapped", attn_logit_softcapping=None)
    assert (full_logits(ours(uncapped), IDS) - full_logits(ours(capped), IDS)).abs().max() > 1e-2


@pytest.mark.parametrize("cap", [None, 1.0, 2.0])
def test_the_multimodal_gemma3_s_text_model_is_its_target(tmp_path, cap):
    """Gemma-3 4B's files as transformers writes them (language_model.model.*, vision_tower.*,
    multi_modal_projector.*): the text model alone loads (the vision tower does not) and gives transformers'
    logits for input_ids alone; uncapped whatever text_config's final_logit_softcapping says (only
    Gemma3ForCausalLM, the 1B's gemma3_text, reads it: a cap would be another distribution, silently)."""
    text = {**SIZES, **SMALL, "num_hidden_layers": 3, "initializer_range": 0.15, "rope_parameters": LINEAR_GLOBAL,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
            "final_logit_softcapping": cap}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "image_size": 28, "patch_size": 14}
    cfg = AutoConfig.for_model("gemma3", text_config=text, vision_config=vision, mm_tokens_per_image=4,
                               image_token_index=90, boi_token_index=91, eoi_token_index=92)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = AutoModelForImageTextToText.from_config(cfg).eval()
        with torch.no_grad():
            for p in model.parameters():   # norms off their zero start, as write_target does
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(tmp_path)
    names = set(load_file(str(tmp_path / "model.safetensors")))
    assert "language_model.model.layers.0.pre_feedforward_layernorm.weight" in names
    assert any(n.startswith("vision_tower.") for n in names)
    ids = IDS % 88   # text ids, below the image tokens
    with torch.no_grad():
        want = model(input_ids=ids).logits
    assert cap is None or want.abs().max() > cap   # a cap at `cap` would change them
    torch.testing.assert_close(full_logits(ours(tmp_path), ids), want, atol=ATOL, rtol=0)


def gemma_echo_draft(folder, target):
    """test_phi3_target's echo draft for a Gemma target: its final norm is the target's as a plain RMSNorm's weight
    (1 + the offset the target holds), so its first proposal is the target's own next token."""
    draft = echo_draft(folder, target)
    t = load_file(str(draft / "model.safetensors"))
    t["norm.weight"] = t["norm.weight"] + 1.0
    save_file(t, str(draft / "model.safetensors"), metadata={"format": "pt"})
    return draft


@pytest.mark.parametrize("name", ["gemma-3-4b text (linear global rope)", "gemma-2 (caps binding)"])
def test_speculative_decoding_equals_target_only(targets, tmp_path, name):
    folder = targets(name, layers=8)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=gemma_echo_draft(tmp_path / "d", folder))
    prompts = [[1, 5, 9, 3, 4, 6], [7, 8]]
    base = model.generate_baseline(prompts, max_new_tokens=24, stop=[])
    for shape in (dict(topk=1, steps=3), dict(topk=3, steps=3, draft_tokens=7)):
        spec = model.generate(prompts, max_new_tokens=24, stop=[], **shape)
        assert [s.token_ids for s in spec] == [b.token_ids for b in base]
        assert sum(spec[0].stats.accepted_per_position) > 0   # drafted tokens were taken, not only the target's


REFUSED = {   # name: (config.json changes, what the refusal says)
    "bidirectional": ({"use_bidirectional_attention": True}, "use_bidirectional_attention=True, which draftsmith "
                                                             "does not compute; allowed: False (or the key absent)"),
    "exact gelu": ({"hidden_activation": "gelu"}, "hidden_activation='gelu', which draftsmith does not compute; "
                                                  "allowed: 'gelu_pytorch_tanh' (or the key absent)"),
    "no scale": ({"query_pre_attn_scalar": 0}, "query_pre_attn_scalar=0 is no scale draftsmith can compute; "
                                               "allowed: a positive number"),
    "negative cap": ({"final_logit_softcapping": -3.0}, "final_logit_softcapping=-3.0 is no scale"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_is_not_computed_is_refused_before_the_tensors(targets, tmp_path, monkeypatch, name):
    changes, said = REFUSED[name]
    folder = edited(targets("gemma-3-1b (5:1)"), tmp_path, **changes)
    message = refusal_before_tensors(folder, monkeypatch)
    assert message.startswith(f"{folder / 'config.json'}: gemma3_text target: {said}"), message
    assert "Fix: use a target whose config.json has an allowed value" in message


def test_a_layer_type_without_a_rope_is_refused_naming_it():
    from transformers import Gemma3TextConfig

    from draftsmith.components.rope import inv_freq_for
    from draftsmith.errors import CheckpointError

    cfg = Gemma3TextConfig(**SMALL, hidden_size=64, num_attention_heads=4, num_hidden_layers=2)
    with pytest.raises(CheckpointError, match="one rope per layer type .*none for layer type 'chunked_attention'"):
        inv_freq_for(cfg, 16, layer_type="chunked_attention")


def test_half_precision_rounds_as_transformers_gemma():
    """In bfloat16 the offset norm applies (1 + w) in float32 before the cast back, and the embedding's factor is
    rounded to the dtype first (sqrt(3072) = 55.43 becomes 55.5): bit for bit transformers' Gemma modules."""
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm, Gemma3TextScaledWordEmbedding

    from draftsmith.assembler.models import CausalLM
    from draftsmith.components.dims import Dims
    from draftsmith.components.norms import RMSNorm

    g = torch.Generator().manual_seed(0)
    ref = Gemma3RMSNorm(64).to(torch.bfloat16)
    ref.weight.data = (torch.randn(64, generator=g) * 0.5).to(torch.bfloat16)
    norm = RMSNorm(64, 1e-6, offset=1.0).to(torch.bfloat16)
    norm.weight.data = ref.weight.data.clone()
    x, delta = (torch.randn(3, 5, 64, generator=g).to(torch.bfloat16) * 4 for _ in range(2))
    assert torch.equal(norm(x), ref(x))
    assert torch.equal(norm.add_forward(x, delta)[1], ref(x + delta))
    H = 3072
    embed = Gemma3TextScaledWordEmbedding(10, H, 0, embed_scale=H**0.5).to(torch.bfloat16)
    dims = Dims(hidden=H, heads=1, kv_heads=1, head_dim=H, intermediate=1, eps=1e-6, vocab=10, layers=0, config=None)
    model = CausalLM(dims, [], torch.nn.Identity(), tie=False, embed_scale=H**0.5).to(torch.bfloat16)
    model.model.embed_tokens.weight.data = embed.weight.data.clone()
    ids = torch.arange(10)[None]
    with torch.no_grad():
        assert torch.equal(model(ids, ids)[0], embed(ids))


@pytest.mark.parametrize("name", ["gemma-3-1b (5:1)", "gemma-2 (caps binding)"])
def test_bfloat16_logits_are_transformers_own_bit_for_bit(targets, name):
    """A whole bfloat16 model: Gemma-3 under draftsmith's sdpa gives transformers' sdpa logits bit for bit (its
    eager attention rounds the scores in bf16: 1-2 bf16 steps off both), Gemma-2's capped scores transformers'
    eager ones (the one attention transformers runs a cap with)."""
    from transformers import AutoModelForCausalLM

    from draftsmith.assembler.assemble import load_target
    from draftsmith.components import backends
    from draftsmith.registry import default_registry

    folder = targets(name)
    impl = "eager" if name.startswith("gemma-2") else "sdpa"
    theirs = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16, attn_implementation=impl).eval()
    model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.bfloat16, device="cpu")[0]
    with torch.no_grad():
        assert torch.equal(model.logits(model(IDS, torch.arange(IDS.shape[1]).expand_as(IDS))[0]), theirs(IDS).logits)
