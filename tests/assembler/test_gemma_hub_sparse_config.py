"""The Hub's Gemma-3 4B / 12B / 27B config.json: its text_config is what transformers writes of a sub-config, the
keys that differ from Gemma3TextConfig's defaults only (4B: no num_attention_heads, num_key_value_heads, head_dim,
vocab_size, query_pre_attn_scalar; 12B / 27B: no vocab_size). Such a target loads with those defaults, as
transformers reads it, and gives transformers' logits (float32); train's fresh draft and the testing writers read
its sizes the same way. Only the sizes the Hub states are shrunk."""
import json

import pytest
import torch
from transformers import AutoConfig, AutoModelForImageTextToText

import draftsmith
from draftsmith.testing import write_eagle3
from draftsmith.train.draft_io import target_text_keys
from test_targets_zoo import ATOL, full_logits, ours

VISION = {"hidden_size": 32, "image_size": 28, "intermediate_size": 64, "model_type": "siglip_vision_model",
          "num_attention_heads": 2, "num_hidden_layers": 1, "patch_size": 14, "vision_use_head": False}
TOP = {"architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
       "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 4,
       "model_type": "gemma3", "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
       "vision_config": VISION}
LINEAR = {"factor": 8.0, "rope_type": "linear"}
TEXT = {   # the Hub's text_config keys, sizes shrunk
    "gemma-3-4b-it": {"hidden_size": 64, "intermediate_size": 128, "model_type": "gemma3_text",
                      "num_hidden_layers": 7, "rope_scaling": LINEAR, "sliding_window": 4},
    "gemma-3-27b-it": {"head_dim": 16, "hidden_size": 64, "intermediate_size": 128, "model_type": "gemma3_text",
                       "num_attention_heads": 4, "num_hidden_layers": 7, "num_key_value_heads": 2,
                       "query_pre_attn_scalar": 24, "rope_scaling": LINEAR, "sliding_window": 4},
}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            folder, config = tmp_path_factory.mktemp("gemma3"), {**TOP, "text_config": TEXT[name]}
            (folder / "config.json").write_text(json.dumps(config))
            with torch.random.fork_rng():
                torch.manual_seed(0)
                model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(folder),
                                                                dtype=torch.float32).eval()
                with torch.no_grad():
                    for p in model.parameters():   # norms off their zero start
                        p.add_(torch.randn_like(p) * 0.1)
            model.save_pretrained(folder)
            (folder / "config.json").write_text(json.dumps(config))   # the Hub's file, not save_pretrained's
            made[name] = folder, model
        return made[name]
    return get


@pytest.mark.parametrize("name", sorted(TEXT))
def test_the_hub_s_sparse_text_config_loads_as_transformers_reads_it(hub, name):
    folder, model = hub(name)
    assert model.config.text_config.vocab_size == 262208   # Gemma3TextConfig's default, which the file leaves out
    ids = torch.randint(0, 200, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(input_ids=ids).logits
    torch.testing.assert_close(full_logits(ours(folder), ids), want, atol=ATOL, rtol=0)


def test_train_and_the_writers_read_the_sizes_the_file_leaves_to_its_type(hub, tmp_path):
    folder, _ = hub("gemma-3-4b-it")
    keys = target_text_keys(folder)   # train's fresh draft: its vocabulary and heads
    assert (keys["vocab_size"], keys["num_attention_heads"], keys["num_key_value_heads"]) == (262208, 8, 4)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=write_eagle3(tmp_path / "d", folder,
                                                                                  draft_vocab=64))
    out = model.generate([[2, 5, 9, 3]], max_new_tokens=4, stop=[])
    assert out[0].token_ids == model.generate_baseline([[2, 5, 9, 3]], max_new_tokens=4, stop=[])[0].token_ids
