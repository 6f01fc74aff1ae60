"""Kimi-K2 (config.json ``model_type: kimi_k2``, which transformers has no class for: its auto_map names remote code)
and Kimi-K2.5 (``kimi_k25``: that text model under ``text_config`` beside a vision tower) are DeepSeek-V3's text
model: draftsmith reads kimi_k2's config as transformers' deepseek_v3 (as transformers reads Kimi-K2.5's
text_config), never running the checkpoint's code, and Kimi-K2.5's files in the Hub's layout
(``language_model.model.*``), transformers 5.24's own save (``language_model.model.blocks.*``) and transformers'
module names (``model.language_model.*``), the vision tower not loaded. Logits equal transformers'
DeepseekV3ForCausalLM of the same weights (and Kimi_K25ForConditionalGeneration's, text only) in float32; greedy
speculative decoding equals target-only; a router option, a text model of another type or an INT4 checkpoint is
refused by name before any tensor is read; a remote-code tokenizer (Kimi's tiktoken one) leaves the target to token
ids, a text prompt refused with the reason."""
import json
import logging
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, DeepseekV3Config

import draftsmith
from draftsmith.assembler.assemble import load_target, plan_target, read_tokenizer
from draftsmith.assembler.config import target_hf_config
from draftsmith.cli.app import target_folder_problems
from draftsmith.components import backends
from draftsmith.components.moe import SparseMoE
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.errors import CheckpointError
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle3
from draftsmith.testing.decoding import decodes_as_target_only
from draftsmith.testing.kimi import write_kimi_k2, write_kimi_k25, write_kimi_text, write_kimi_tokenizer

IDS = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))
NAMES = ("k2", "k25-hub", "k25-saved", "k25-language_model", "k25-hub-vision_config")
VISION = ("vision_tower.", "mm_projector.", "model.vision_tower.", "model.mm_projector.")
# Kimi-K2-Thinking's / Kimi-K2.5's quantization_config: INT4 routed experts (compressed-tensors pack-quantized)
INT4 = {"config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "output_activations": None,
                                      "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32,
                                                  "symmetric": True, "dynamic": False}}},
        "format": "pack-quantized", "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
        "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed"}


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    return write_kimi_text(tmp_path_factory.mktemp("text"))


@pytest.fixture(scope="module")
def kimi(tmp_path_factory, text):
    made = {}

    def get(name):
        if name not in made:
            folder = tmp_path_factory.mktemp(name) / "t"
            layout = name.split("-")[1] if "-" in name else None
            made[name] = write_kimi_k2(folder, text) if layout is None else \
                write_kimi_k25(folder, text, layout=layout, hub_vision=name.endswith("vision_config"))
        return made[name]
    return get


@pytest.fixture(scope="module")
def want(text):
    model = AutoModelForCausalLM.from_pretrained(text, dtype=torch.float32, experts_implementation="eager").eval()
    with torch.no_grad():
        return model(IDS).logits


def ours(folder):
    model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]
    with torch.no_grad():
        return model, model.logits(model(IDS, torch.arange(IDS.shape[1]).expand_as(IDS))[0])


def test_kimi_k2_s_config_is_read_as_deepseek_v3_s_without_its_remote_code(kimi, text):
    with pytest.raises(ValueError, match="trust_remote_code"):   # transformers alone: only through remote code
        AutoConfig.from_pretrained(str(kimi("k2")), trust_remote_code=False)
    cfg = target_hf_config(kimi("k2"))
    assert type(cfg) is DeepseekV3Config and cfg.model_type == "kimi_k2" and cfg.name_or_path == str(kimi("k2"))
    theirs = AutoConfig.from_pretrained(str(text)).to_dict()
    assert {k: v for k, v in cfg.to_dict().items() if theirs.get(k) != v} == {   # every other value as deepseek_v3's
        "auto_map": cfg.auto_map, "_name_or_path": str(kimi("k2"))}
    assert not [m for m in sys.modules if m.startswith(("configuration_deepseek", "transformers_modules"))]


@pytest.mark.parametrize("name", NAMES)
def test_logits_match_transformers_deepseek_v3(kimi, want, name):
    model, got = ours(kimi(name))
    assert want.std() > 0.1
    assert [type(layer.mlp) is SparseMoE for layer in model.model.layers] == [False, True, True]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("k25") and "vision_config" not in n])
def test_kimi_k25_logits_match_transformers_kimi_k25_text_only(kimi, name):
    model = AutoModelForImageTextToText.from_pretrained(kimi(name), dtype=torch.float32,
                                                        experts_implementation="eager").eval()
    with torch.no_grad():
        theirs = model(input_ids=IDS).logits
    torch.testing.assert_close(ours(kimi(name))[1], theirs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["k25-hub", "k25-saved", "k25-language_model"])
def test_the_vision_tower_is_not_loaded(kimi, name):
    planned, cfg = plan_target(kimi(name), default_registry(), backends.sdpa)
    vision = [n for n in load_file(str(kimi(name) / "model.safetensors")) if n.startswith(VISION)]
    assert vision and set(vision) <= set(planned.plan.ignored) and cfg.model_type == "kimi_k25"
    assert not [n for n in planned.module.state_dict() if "vision" in n or "projector" in n]


@pytest.mark.parametrize("name", ["k2", "k25-hub"])
def test_greedy_speculative_decoding_equals_target_only(kimi, name, tmp_path):
    model = draftsmith.assemble("eagle3-llama", target=kimi(name), draft=write_eagle3(tmp_path / "d", kimi(name)),
                                dtype="float32")
    decodes_as_target_only(model)


@pytest.mark.parametrize("name, key, value, said", [
    ("k2", "topk_method", "greedy", "kimi_k2 target: topk_method='greedy'"),
    ("k2", "scoring_func", "softmax", "kimi_k2 target: scoring_func='softmax'"),
    ("k2", "n_group", 3, "kimi_k2 target: n_group=3"),
    ("k2", "quantization_config", INT4, "format='pack-quantized' is not supported"),
    ("k25-hub", "scoring_func", "softmax", "kimi_k25 target: scoring_func='softmax'"),
    ("k25-hub", "topk_group", 2, "kimi_k25 target: topk_group=2"),
    ("k25-hub", "model_type", "llama", "kimi_k25 target: text_config.model_type is 'llama'"),
    ("k25-hub", "quantization_config", INT4, "format='pack-quantized' is not supported")])
def test_what_deepseek_v3_s_layers_would_misread_is_refused_before_any_tensor(kimi, tmp_path, name, key, value,
                                                                              said):
    """The weights are no safetensors file here: the refusal comes first."""
    cfg = json.loads((kimi(name) / "config.json").read_text())
    (cfg["text_config"] if "text_config" in cfg else cfg)[key] = value
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(UnsupportedTarget, match=f"{tmp_path}/config.json: (?s:.*){said}"):
        plan_target(tmp_path, default_registry(), backends.sdpa)


@pytest.mark.parametrize("name", ["k25-hub", "k25-saved", "k25-language_model"])
def test_a_tied_config_over_a_head_under_the_text_prefix_hears_the_tied_head_explanation(kimi, tmp_path, name):
    """Kimi_K25Config ties by default: a config.json without tie_word_embeddings over files holding the head (under
    the text model's prefix in the Hub's layout) is told what the tie means, not that the head is unexpected; a head
    equal to the embedding loads as tied."""
    import shutil

    shutil.copytree(kimi(name), tmp_path, dirs_exist_ok=True)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("tie_word_embeddings")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="lm_head.weight and (?s:.*)tie_word_embeddings true"):
        ours(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    head = next(n for n in tensors if n.endswith("lm_head.weight"))
    tensors[head] = tensors[next(n for n in tensors if n.endswith("embed_tokens.weight"))].clone()
    save_file(tensors, tmp_path / "model.safetensors")
    model, logits = ours(tmp_path)
    assert model.tie and torch.isfinite(logits).all()


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory):
    folder = write_kimi_k2(tmp_path_factory.mktemp("tok") / "t", vocab_size=258, bos_token_id=256, eos_token_id=257)
    return write_kimi_tokenizer(folder)


def test_a_remote_code_tokenizer_is_refused_with_the_reason_not_run(tokenized, caplog):
    with pytest.raises(CheckpointError) as err:
        read_tokenizer(tokenized)
    said = str(err.value)
    assert "tokenization_kimi.TikTokenTokenizer" in said and "--token-ids" in said
    assert "Please pass the argument" not in said   # transformers' advice to run it, which draftsmith never does
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        assert read_tokenizer(tokenized, remote_as_none=True) is None
    assert "tokenization_kimi.TikTokenTokenizer" in caplog.text
    assert not [m for m in sys.modules if "tokenization_kimi" in m]


def test_a_target_with_a_remote_code_tokenizer_decodes_token_ids_and_refuses_text(tokenized, tmp_path):
    names = {"prompt": "--prompt", "max_new_tokens": "--max-new-tokens"}
    problems = target_folder_problems(tokenized, "hello", 4, names)   # the CLI, before any model loads
    assert len(problems) == 1 and problems[0].startswith("--prompt: a text prompt needs the target's tokenizer")
    assert target_folder_problems(tokenized, [1, 2, 3], 4, {**names, "prompt": "--token-ids"}) == []
    model = draftsmith.assemble("eagle3-llama", target=tokenized, draft=write_eagle3(tmp_path / "d", tokenized),
                                dtype="float32")
    assert model.tokenizer is None
    decodes_as_target_only(model)
    with pytest.raises(ValueError, match="token ids"):
        model.generate("hello", max_new_tokens=2)


def test_reading_a_remote_code_tokenizer_keeps_transformers_config_warning_quiet(tokenized, tmp_path):
    """transformers warns that a kimi_k2 config makes a model of type '' while it looks for the tokenizer class:
    about a config draftsmith reads itself, so not shown; its logger is as it was after."""
    from transformers.utils import logging as hf_logging

    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    hf_logging.get_logger().addHandler(handler)
    before = hf_logging.get_verbosity()
    try:
        hf_logging.set_verbosity_warning()
        draftsmith.assemble("eagle3-llama", target=tokenized, draft=write_eagle3(tmp_path / "d", tokenized),
                            dtype="float32")
        assert hf_logging.get_verbosity() == hf_logging.WARNING
    finally:
        hf_logging.get_logger().removeHandler(handler)
        hf_logging.set_verbosity(before)
    assert not [m for m in said if "to instantiate a model of type" in m]
